package ratelimit_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/internal/benchkit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// BenchmarkObserver times AllowN on one key of the memory store (the
// allowed path's token bucket) without hooks, with an observer that counts
// events, and in dry-run mode. Without hooks it is the same as
// BenchmarkMemory/memory/tokenbucket/keys=1/allowed/serial:
//
//	go test -run='^$' -bench=Observer -benchmem -count=10 .
func BenchmarkObserver(b *testing.B) {
	var events atomic.Int64
	count := func(context.Context, ratelimit.Event) { events.Add(1) }
	for _, bc := range []struct {
		name string
		opts []ratelimit.Option
	}{
		{"unset", nil},
		{"observer", []ratelimit.Option{ratelimit.WithObserver(count), ratelimit.WithName("api")}},
		{"observer-keys", []ratelimit.Option{ratelimit.WithObserver(count), ratelimit.WithObservedKeys()}},
		{"dry-run", []ratelimit.Option{ratelimit.WithDryRun()}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			alg, err := benchkit.Algorithms[0].Allowed()
			if err != nil {
				b.Fatal(err)
			}
			lim, err := ratelimit.New(alg, memorystore.New[string](), bc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if _, err := lim.AllowN(ctx, "bench:0", benchkit.Algorithms[0].Prime); err != nil {
				b.Fatal(err)
			}
			benchkit.Serial(b, lim, []string{"bench:0"}, true)
		})
	}
}
