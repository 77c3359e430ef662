package ratelimit_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
)

// A limit a Decision cannot hold is clamped, not wrapped into the flags.
func TestDecisionFieldsClampLimit(t *testing.T) {
	for _, c := range []struct{ limit, want int64 }{
		{-1, 0}, {algorithm.MaxLimit + 1, algorithm.MaxLimit}, {1 << 62, algorithm.MaxLimit},
	} {
		d := ratelimit.DecisionFields{Limit: c.limit}.Decision()
		if d.Limit() != c.want || d.Allowed() || d.DryRunDenied() || d.BreakerOpen() || d.Source() != ratelimit.FromStore {
			t.Errorf("Limit %d: got %v, want a denial from the store with Limit %d", c.limit, d, c.want)
		}
	}
}

func TestDecisionString(t *testing.T) {
	d := ratelimit.DecisionFields{Limit: 10, Remaining: 0, RetryAfter: 1500 * time.Millisecond,
		ResetAfter: 3 * time.Second, Source: ratelimit.FromLocal, BreakerOpen: true}.Decision()
	s := d.String()
	for _, part := range []string{"denied", "0 of 10", "retry after 1.5s", "reset after 3s", "local", "breaker open"} {
		if !strings.Contains(s, part) {
			t.Errorf("String() = %q, which does not say %q", s, part)
		}
	}
}

// A Decision must stay small enough for Go to keep it in registers (at
// most four fields, 32 bytes): a larger one is copied through memory on
// every call and costs each decision about 10ns (BenchmarkMemory).
func TestDecisionFitsInRegisters(t *testing.T) {
	typ := reflect.TypeFor[ratelimit.Decision]()
	if typ.NumField() > 4 || typ.Size() > 32 {
		t.Fatalf("Decision has %d fields and %d bytes; Go keeps at most 4 fields and 32 bytes in registers",
			typ.NumField(), typ.Size())
	}
}

// A fake limiter, in the tests of a handler, returns decisions built from
// their fields.
func ExampleDecisionFields() {
	d := ratelimit.DecisionFields{Limit: 10, RetryAfter: 2 * time.Second, ResetAfter: 20 * time.Second}.Decision()
	fmt.Println(d.Allowed(), d.RetryAfter())
	fmt.Println(d)
	// Output:
	// false 2s
	// denied: 0 of 10 remaining, retry after 2s, reset after 20s, from store
}
