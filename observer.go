package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// Event describes one decision, or one failure to decide.
type Event struct {
	Name     string        // the limiter's name (WithName), or ""
	Op       Op            // the operation that decided
	Allowed  bool          // the verdict: false for a denial, in dry run too, and with Err
	DryRun   bool          // the limiter is in dry-run mode (WithDryRun)
	Cost     int64         // the cost asked for (1 for Peek)
	Latency  time.Duration // how long the decision took, on the limiter's clock
	Decision Decision      // the decision returned; zero with Err
	Err      error         // the error returned: no decision was made
	Key      any           // the key, with WithObservedKeys only: never a metric attribute
}

// Op is the operation an Event reports.
type Op uint8

const (
	OpAllow   Op = iota // AllowN, and each attempt of a WaitN that cannot book
	OpPeek              // Peek
	OpReserve           // ReserveN and WaitN's booking; RetryAfter is its delay
	OpCancel            // a booking given back (Cancel, or a WaitN cut short)
	OpRefund            // Refund; Decision is the key's state after it
	OpSettle            // a Reservation's Settle; Cost is the cost settled to
)

// String returns "allow", "peek", "reserve", "cancel", "refund" or "settle".
func (o Op) String() string {
	switch o {
	case OpAllow:
		return "allow"
	case OpPeek:
		return "peek"
	case OpReserve:
		return "reserve"
	case OpCancel:
		return "cancel"
	case OpRefund:
		return "refund"
	case OpSettle:
		return "settle"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// WithObserver calls obs (quick, safe for concurrent use) with each Event.
func WithObserver(obs func(ctx context.Context, e Event)) Option {
	return optionFunc(func(o *options) {
		if obs != nil {
			o.hooks.observer = obs
		}
	})
}

// WithObservedKeys puts each key in Event.Key, allocating per decision.
func WithObservedKeys() Option {
	return optionFunc(func(o *options) { o.hooks.keys = true })
}

// WithDryRun admits what the Limiter would deny, marked DryRunDenied.
func WithDryRun() Option {
	return optionFunc(func(o *options) { o.hooks.dryRun = true })
}

// hooks are the options that act around each decision: an observer and
// dry-run mode. They are the one instrumentation seam: the engine of a
// Limiter or Policy holds them, and every operation that decides calls
// begin before its decision and end after it (AllowN and Peek check active
// first), end being the one place where dry run is applied and an Event
// reported.
type hooks struct {
	observer func(context.Context, Event)
	name     string
	keys     bool
	dryRun   bool
}

// active reports whether any hook is set.
func (h *hooks) active() bool { return h.observer != nil || h.dryRun }

// begin starts timing a decision on clk, when there is an observer to
// report it to.
func (h *hooks) begin(clk interface{ Now() time.Time }) (start time.Time) {
	if h.observer != nil {
		start = clk.Now()
	}
	return start
}

// end applies dry-run mode to *d, the decision of op on key at cost begun
// at start (or the error err), and reports its event to the observer.
func end[K comparable](ctx context.Context, h *hooks, clk interface{ Now() time.Time }, op Op, key K, cost int64, start time.Time, d *Decision, err error) {
	allowed := err == nil && d.Allowed()
	if err == nil && !allowed && h.dryRun {
		d.markDryRun()
	}
	if h.observer == nil {
		return
	}
	e := Event{Name: h.name, Op: op, Allowed: allowed, DryRun: h.dryRun, Cost: cost,
		Latency: clk.Now().Sub(start), Decision: *d, Err: err}
	if h.keys {
		e.Key = key
	}
	h.observer(ctx, e)
}
