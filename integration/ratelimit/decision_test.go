package ratelimit_test

import (
	"encoding/json"
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
