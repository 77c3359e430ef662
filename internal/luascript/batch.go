package luascript

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strings"
	"sync"
)

//go:embed batch.lua
var batchSource string

// batches caches Batch's scripts, by the decision script's SHA1.
var batches sync.Map

// Batch returns the script deciding several requests for one key in
// order, each as decision would alone after the ones before it
// (batch.lua): ARGV[1] the number of requests n, then each request's now
// and cost, then decision's ARGV[3…]; the reply is each request's reply in
// turn. decision is a script of For (a Take's; peeks and bookings are
// not batched).
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
