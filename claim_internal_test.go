package ratelimit

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestWithClaimLivesWhileAnyOfItsLimitersDoes: two Limiters of one
// Limiter's With for the same limit (the second opened after the first
// left the With cache) share one claim, which lasts while either lives:
// once the first is collected, another family still cannot take the ID
// from the second.
func TestWithClaimLivesWhileAnyOfItsLimitersDoes(t *testing.T) {
	st := memorystore.New[string]()
	baseAlg, err := tokenbucket.PerSecond(5)
	if err != nil {
		t.Fatal(err)
	}
	alg, err := tokenbucket.PerMinute(7)
	if err != nil {
		t.Fatal(err)
	}
	base, err := New(baseAlg, st)
	if err != nil {
		t.Fatal(err)
	}
	first, err := base.openWith(alg) // as With opens a limit it does not keep
	if err != nil {
		t.Fatal(err)
	}
	second, err := base.openWith(alg)
	if err != nil {
		t.Fatal(err)
	}
	gone := weak.Make(first)
	first = nil
	for deadline := time.Now().Add(10 * time.Second); gone.Value() != nil; {
		if time.Now().After(deadline) {
			t.Fatal("the first Limiter of With was not collected in 10 s")
		}
		runtime.GC()
	}
	runtime.GC()
	claims.mu.Lock()
	held := claims.m[claimKey{st, store.DefaultID(alg.Spec())}].Value()
	claims.mu.Unlock()
	if held == nil {
		t.Error("the claim went with the first Limiter of With; the second still uses the ID")
	}
	runtime.KeepAlive(second)
}
