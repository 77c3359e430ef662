package luascript

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strings"
	"sync"
)

var (
	//go:embed batch.lua
	batchSource string
	//go:embed opbatch.lua
	opBatchSource string
)

// batches caches Batch's and OpBatch's scripts, by the script's SHA1.
var batches sync.Map

// Batch returns the script deciding several requests for one key in
// order, each as decision would alone after the ones before it
// (batch.lua): ARGV[1] the number of requests n, then each request's now
// and cost, then decision's ARGV[3…]; the reply is each request's reply in
// turn. decision is a script of For (a Take's; peeks are not batched,
// and bookings have OpBatch).
func Batch(decision *Script) *Script {
	if s, ok := batches.Load(decision.SHA1); ok {
		return s.(*Script)
	}
	head, limits, tail := composeParts(strings.Split(decision.Name, "+"), true)
	src := strings.NewReplacer(
		"--@head\n", head,
		"--@decision\n", prelude+limits,
		"--@tail\n", tail,
	).Replace(batchSource)
	source := withoutComments(src)
	sum := sha1.Sum([]byte(source))
	s := &Script{Name: "batch:" + decision.Name, Source: source, SHA1: hex.EncodeToString(sum[:]), Limits: decision.Limits}
	actual, _ := batches.LoadOrStore(decision.SHA1, s)
	return actual.(*Script)
}

// OpBatch returns the script running several requests of a booking
// operation for one key in order, each as op, a script of ForOp, would
// alone after the ones before it (opbatch.lua): ARGV[1] the number of
// requests n, ARGV[2] how many arguments each has of its own (m: its now,
// its cost, then op's own), then each request's m, then op's ARGV[3…] up
// to op's own; the reply is each request's reply in turn.
func OpBatch(op *Script) *Script {
	if s, ok := batches.Load(op.SHA1); ok {
		return s.(*Script)
	}
	// The op script's first line names it; the rest is the body of run.
	_, body, _ := strings.Cut(op.Source, "\n")
	src := strings.Replace(opBatchSource, "--@op\n", body, 1)
	source := withoutComments(src)
	sum := sha1.Sum([]byte(source))
	s := &Script{Name: "batch:" + op.Name, Source: source, SHA1: hex.EncodeToString(sum[:]), Limits: op.Limits}
	actual, _ := batches.LoadOrStore(op.SHA1, s)
	return actual.(*Script)
}
