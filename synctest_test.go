//go:build go1.25

package ratelimit_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestWaitUnderSynctest: under testing/synctest, whose clock moves only
// when every goroutine sleeps, Waits on the local clock wake at exactly
// the instant the limit admits them, not a fraction of a microsecond
// later.
func TestWaitUnderSynctest(t *testing.T) {
	for name, alg := range map[string]func() (algorithm.Algorithm, error){
		"tokenbucket": func() (algorithm.Algorithm, error) { return tokenbucket.PerSecond(2, tokenbucket.Burst(1)) },
		"gcra":        func() (algorithm.Algorithm, error) { return gcra.PerSecond(2, gcra.Burst(1)) },
		"slidinglog":  func() (algorithm.Algorithm, error) { return slidinglog.PerSecond(2) },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, err := alg()
				if err != nil {
					t.Fatal(err)
				}
				lim, err := ratelimit.New(a, memorystore.New[string]())
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				for range 7 {
					if _, err := lim.Wait(t.Context(), "k"); err != nil {
						t.Fatal(err)
					}
				}
				if got, want := time.Since(start), 3*time.Second; got != want {
					t.Errorf("7 Waits at 2/s took %v, want %v", got, want)
				}
			})
		})
	}
}
