package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// quickRemote is a memory store whose tables say they are remote
// (store.Remote), with a CallTimeout of 3 s: what the Limiter adds to a
// remote call for a caller's context, without the network.
type quickRemote struct{ next store.Store[string] }

func (s quickRemote) Open(limits []store.Limit, clk clock.Clock) (store.Table[string], error) {
	t, err := s.next.Open(limits, clk)
	if err != nil {
		return nil, err
	}
	return quickRemoteTable{t}, nil
}

type quickRemoteTable struct{ store.Table[string] }

func (quickRemoteTable) CallTimeout() time.Duration { return 3 * time.Second }

// BenchmarkRemoteContext is what a caller's context costs a decision on a
// remote store, without the network (the integration module's
// BenchmarkCallerContext measures it on Redis): a caller on
// context.Background(), with a context.WithCancel, with a deadline beyond
// the store's CallTimeout (the call is made on the caller's goroutine) and
// with one nearer (the call is handed to a worker).
func BenchmarkRemoteContext(b *testing.B) {
	alg, err := tokenbucket.New(tokenbucket.Config{Capacity: 1 << 30, Rate: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	lim, err := ratelimit.New(alg, quickRemote{memorystore.New[string]()}, ratelimit.WithName("remote-context"))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		timeout time.Duration // 0: a context.WithCancel
	}{{"background", -1}, {"cancel", 0}, {"deadline=10s", 10 * time.Second}, {"deadline=2s", 2 * time.Second}} {
		b.Run("ctx="+c.name, func(b *testing.B) {
			ctx := context.Background()
			switch {
			case c.timeout == 0:
				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				ctx = cctx
			case c.timeout > 0:
				cctx, cancel := context.WithTimeout(ctx, time.Hour)
				defer cancel()
				ctx = cctx
			}
			renew := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if c.timeout > 0 && time.Since(renew) > time.Second {
					b.StopTimer()
					cctx, cancel := context.WithTimeout(context.Background(), c.timeout)
					defer cancel()
					ctx, renew = cctx, time.Now()
					b.StartTimer()
				}
				if _, err := lim.Allow(ctx, "k"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
