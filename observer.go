package ratelimit

import (
	"context"
	"fmt"
	"time"
)

// Observer receives an Event for every decision of the limiters it is given
// to with WithObserver, for metrics, logs or traces. Package otelratelimit
// (a module of its own) turns events into OpenTelemetry metrics.
//
// Observe is called once per decision, after the decision is made and
// before it is returned, on the caller's goroutine and with the caller's
// context. It must be safe for concurrent use, and should be quick: its time
// is added to every decision's.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f(ctx, e).
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Event describes one decision, or one failure to decide. Every field but
// Key is of low cardinality or a number, fit to be a metric's attribute or
// value; Key is unbounded.
type Event struct {
	// Name names what decided: the limiter's name (WithName), or the name
	// of a composed policy. It is "" for an unnamed limiter.
	Name string
	// Op is the operation that decided: OpAllow for AllowN (and each
	// attempt of WaitN), OpPeek for Peek.
	Op Op
	// Outcome is the limit's verdict: allowed, denied, or an error that
	// left no decision. In dry-run mode a request the limit denied is
	// OutcomeDenied although it was admitted (Decision.DryRunDenied).
	Outcome Outcome
	// DryRun reports that the limiter runs in dry-run mode (WithDryRun):
	// no request is denied, whatever Outcome says.
	DryRun bool
	// Cost is the cost asked for: n for AllowN, 1 for Peek.
	Cost int64
	// Latency is how long the decision took, on the limiter's clock (so a
	// fake clock reports 0 unless it is advanced during the call).
	Latency time.Duration
	// Decision is the decision returned; zero with OutcomeError. Its
	// Source tells whether the store decided or a failure policy did: a
	// Source other than FromStore means the store failed and the policy
	// absorbed the error.
	Decision Decision
	// Err is the error returned with OutcomeError (errors.Is tells store
	// failures, ErrStoreUnavailable, from bad costs and ended contexts);
	// nil otherwise.
	Err error
	// Key is the key decided on, only with WithObservedKeys; nil
	// otherwise. Never make it a metric attribute: every client would
	// become a time series of its own.
	Key any
}

// Op is the operation an Event reports.
type Op uint8

const (
	// OpAllow is a decision that charges: AllowN, and each attempt of
	// WaitN.
	OpAllow Op = iota
	// OpPeek is a look at a key's state that charges nothing: Peek.
	OpPeek
	// OpReserve is a booking: ReserveN, and each of WaitN. Outcome is
	// allowed when it was booked (Decision.RetryAfter is then its delay),
	// denied when it could not be booked in time.
	OpReserve
	// OpCancel is a booking given back: Reservation.Cancel, and a WaitN
	// whose context ended first. Cost is the booking's; Decision the
	// booking's own.
	OpCancel
	// OpRefund is a charge given back: Refund. Decision is the key's state
	// after it.
	OpRefund
)

// String returns "allow", "peek", "reserve", "cancel" or "refund".
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
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Outcome is the verdict an Event reports.
type Outcome uint8

const (
	// OutcomeAllowed: the limit admitted the request.
	OutcomeAllowed Outcome = iota
	// OutcomeDenied: the limit denied the request (and, in dry-run mode,
	// the limiter admitted it anyway).
	OutcomeDenied
	// OutcomeError: no decision was made; Event.Err says why.
	OutcomeError
)

// String returns "allowed", "denied" or "error".
func (o Outcome) String() string {
	switch o {
	case OutcomeAllowed:
		return "allowed"
	case OutcomeDenied:
		return "denied"
	case OutcomeError:
		return "error"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// WithObserver sets an observer that receives an Event for every decision
// the Limiter or Policy makes (AllowN, each attempt of WaitN, Peek; a
// Policy reports its combined decision). A nil observer is
// ignored. Without one, a decision costs nothing more than a nil check.
func WithObserver(obs Observer) Option {
	return optionFunc(func(o *options) {
		if obs != nil {
			o.hooks.observer = obs
		}
	})
}

// WithName names the Limiter in the events its observer receives
// (Event.Name), to tell several limiters apart in metrics. It is a label
// only: it does not name the limiter's state, so renaming a metric never
// resets a key, and two limiters of different names but the same state
// ID share each key's state (see WithStateID).
func WithName(name string) Option {
	return optionFunc(func(o *options) { o.hooks.name = name })
}

// WithObservedKeys puts each decision's key in Event.Key, for observers
// that log keys. It is off by default: boxing a key in an interface costs
// an allocation per decision, and keys must never become metric attributes.
func WithObservedKeys() Option {
	return optionFunc(func(o *options) { o.hooks.keys = true })
}

// WithDryRun runs the Limiter in dry-run (shadow) mode: every decision is
// made and charged as usual (a denial charges nothing, as always), headers
// and metrics are computed from it, but no request is denied. A decision
// the limit denied comes back with Allowed true and DryRunDenied true, its
// RetryAfter and other fields as the denial had them; its Event has
// OutcomeDenied and DryRun set. Turn a new limit on this way and watch what
// it would do. Failure policies decide as usual, and their denials too are
// admitted (FailClosed's, marked DryRunDenied); errors are still returned,
// so a FailWithError limiter whose store fails still fails.
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
	observer Observer
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
	outcome := OutcomeAllowed
	switch {
	case err != nil:
		outcome = OutcomeError
	case !d.Allowed():
		outcome = OutcomeDenied
		if h.dryRun {
			*d = d.DryRun()
		}
	}
	if h.observer == nil {
		return
	}
	e := Event{Name: h.name, Op: op, Outcome: outcome, DryRun: h.dryRun, Cost: cost,
		Latency: clk.Now().Sub(start), Decision: *d, Err: err}
	if h.keys {
		e.Key = key
	}
	h.observer.Observe(ctx, e)
}
