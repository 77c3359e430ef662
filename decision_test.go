package ratelimit_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
)

// drawFields draws the content of any decision a limiter can return.
func drawFields(t *rapid.T) ratelimit.DecisionFields {
	limit := rapid.Int64Range(0, algorithm.MaxLimit).Draw(t, "limit")
	return ratelimit.DecisionFields{
		Allowed:      rapid.Bool().Draw(t, "allowed"),
		Limit:        limit,
		Remaining:    rapid.Int64Range(0, limit).Draw(t, "remaining"),
		RetryAfter:   time.Duration(rapid.Int64Range(0, algorithm.MaxDuration).Draw(t, "retry")) * time.Microsecond,
		ResetAfter:   time.Duration(rapid.Int64Range(0, algorithm.MaxDuration).Draw(t, "reset")) * time.Microsecond,
		Source:       ratelimit.Source(rapid.IntRange(0, 255).Draw(t, "source")),
		DryRunDenied: rapid.Bool().Draw(t, "dry run"),
		BreakerOpen:  rapid.Bool().Draw(t, "breaker"),
	}
}

// A Decision holds every field a limiter can fill in, each read back by
// its method as it was given, whatever the others are.
func TestDecisionFieldsRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := drawFields(t)
		d := f.Decision()
		if got := d.Fields(); got != f {
			t.Fatalf("Fields() = %+v, want %+v", got, f)
		}
		if d.Allowed() != f.Allowed || d.Limit() != f.Limit || d.Remaining() != f.Remaining ||
			d.RetryAfter() != f.RetryAfter || d.ResetAfter() != f.ResetAfter || d.Source() != f.Source ||
			d.DryRunDenied() != f.DryRunDenied || d.BreakerOpen() != f.BreakerOpen {
			t.Fatalf("methods of %v disagree with %+v", d, f)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back ratelimit.Decision
		if err := json.Unmarshal(b, &back); err != nil || back != d {
			t.Fatalf("JSON %s decodes to %v, %v; want %v", b, back, err, d)
		}
	})
}

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

// DryRun admits a denial and marks it, keeping its numbers, and leaves an
// admission as it is.
func TestDecisionDryRun(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := drawFields(t)
		f.DryRunDenied = false
		d := f.Decision()
		want := f
		if !f.Allowed {
			want.Allowed, want.DryRunDenied = true, true
		}
		if got := d.DryRun().Fields(); got != want {
			t.Fatalf("DryRun of %+v = %+v, want %+v", f, got, want)
		}
	})
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
