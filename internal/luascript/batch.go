package luascript

import (
	_ "embed"
	"strings"
)

var (
	//go:embed batch.lua
	batchSource string
	//go:embed opbatch.lua
	opBatchSource string
)

// Batch returns the script deciding several requests for one key in
// order, each as decision would alone after the ones before it
// (batch.lua): ARGV[1] the number of requests n, then each request's now
// and cost, then decision's ARGV[3…]; the reply is each request's reply in
// turn. decision is a decision script (For, or its conversion form; peeks
// are not batched, and bookings have OpBatch).
func Batch(decision *Script) *Script {
	f := decision.form
	f.batch = true
	return scriptOf(f)
}

// OpBatch returns the script running several requests of a booking
// operation for one key in order, each as op, a script of ForOp (or its
// conversion form), would alone after the ones before it (opbatch.lua):
// ARGV[1] the number of requests n, ARGV[2] how many arguments each has of
// its own (m: its now, its cost, then op's own), then each request's m,
// then op's ARGV[3…] up to op's own; the reply is each request's reply in
// turn.
func OpBatch(op *Script) *Script {
	f := op.form
	f.batch = true
	return scriptOf(f)
}

// composeBatch returns the batch of f's decisions (batch.lua).
func composeBatch(f form, names []string) string {
	f.batch = false
	head, limits, tail := composeParts(f, names, true)
	return describe(form{names: f.names, convert: f.convert, letters: f.letters, batch: true}, names) + strings.NewReplacer(
		"--@head\n", head,
		"--@decision\n", prelude+limits,
		"--@tail\n", tail,
	).Replace(batchSource)
}

// composeOpBatch returns the batch of f's op (opbatch.lua): the op's
// script, run whole per request.
func composeOpBatch(f form, names []string) string {
	f.batch = false
	// The op script's own opening comment, up to its prelude, stays out:
	// the batch's says what it is.
	op := composeOp(f, names)
	_, body, _ := strings.Cut(op, prelude)
	f.batch = true
	return describe(f, names) + strings.Replace(opBatchSource, "--@op\n", prelude+body, 1)
}
