// Package tokenbucket provides the token-bucket algorithm in two flavours.
//
// A bucket holds up to Capacity tokens and starts full. A request of cost n
// is admitted when the bucket holds at least n tokens, which it then
// removes; a denied request removes nothing. Buckets refill over time:
//
//   - [New] refills continuously at Rate tokens per second, with
//     floating-point accounting, so high rates never cause false denials.
//   - [NewInterval] adds Tokens whole tokens at the end of every Interval
//     (capacity 10, one token per second, as in the redis.io guide). Time
//     toward the next refill is kept between requests.
//
// Both are most easily said as a quota and a burst, as people say limits:
// PerMinute(100, Burst(20)) is the continuous bucket of 100 per minute in
// bursts of up to 20, IntervalPer(100, time.Minute, Burst(20)) the
// interval bucket that adds a token every 600ms. Buckets built so report
// that quota ([Bucket.Quota]); the Configs say a bucket by its capacity
// and refill instead.
//
// Pick a token bucket to allow bursts up to Capacity while holding a long-run
// rate; pick the interval flavour when clients should see whole tokens
// arrive on a schedule.
package tokenbucket

import (
	"fmt"
	"math"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// Config configures a continuously refilled bucket.
type Config struct {
	// Capacity is the most tokens the bucket holds: the largest burst and the
	// largest cost of one request. 1 ≤ Capacity ≤ algorithm.MaxLimit.
	Capacity int64
	// Rate is how many tokens are added per second, a finite number above
	// 0. Refilling an empty bucket must take at most algorithm.MaxDuration.
	//
	// Beware of integer constants: 100 per minute is Rate: 100.0 / 60, but
	// Rate: 100 / 60 is 1 per second, since Go divides the two integer
	// constants before making a float of the result, and New cannot tell
	// it from a rate of 1 meant as such. [Per] and its shorthands
	// (PerMinute(100, Burst(20))) take the quota as it is said instead.
	Rate float64
}

// Bucket is a continuously refilled token bucket. Create it with [New] or
// [Per].
type Bucket struct {
	capacity float64
	rate     float64 // tokens per second
	perMicro float64 // tokens per microsecond: rate/1e6, rounded once
	perToken float64 // microseconds per token, for first guesses only
	limit    int64
	quota    algorithm.Quota // what Quota reports; no decision reads it
}

var (
	_ algorithm.Narrow  = (*Bucket)(nil)
	_ algorithm.Quoter  = (*Bucket)(nil)
	_ algorithm.Settler = (*Bucket)(nil)
)

// New returns a bucket of cfg.Capacity tokens refilled at cfg.Rate tokens
// per second, or an error wrapping algorithm.ErrInvalidConfig.
func New(cfg Config) (*Bucket, error) {
	if err := algorithm.CheckLimit("tokenbucket: Capacity", cfg.Capacity); err != nil {
		return nil, err
	}
	if err := algorithm.CheckFinite("tokenbucket: Rate", cfg.Rate); err != nil {
		return nil, err
	}
	if fill := float64(cfg.Capacity) * 1e6 / cfg.Rate; !(fill <= float64(algorithm.MaxDuration)) {
		return nil, fmt.Errorf("%w: tokenbucket: refilling %d tokens at %v/s takes longer than %v",
			algorithm.ErrInvalidConfig, cfg.Capacity, cfg.Rate, time.Duration(algorithm.MaxDuration)*time.Microsecond)
	}
	b := &Bucket{capacity: float64(cfg.Capacity), rate: cfg.Rate, perMicro: cfg.Rate / 1e6,
		perToken: 1e6 / cfg.Rate, limit: cfg.Capacity}
	b.quota = algorithm.Quota{Limit: cfg.Capacity, Window: b.Window()}
	return b, nil
}

// Limit returns the capacity.
func (b *Bucket) Limit() int64 { return b.limit }

// Window returns how long an empty bucket takes to refill: the period
// over which Capacity is replenished (Capacity/Rate, rounded up to 1µs).
func (b *Bucket) Window() time.Duration {
	return time.Duration(math.Ceil(b.capacity*1e6/b.rate)) * time.Microsecond
}

// Quota returns the quota the bucket was built with: n per period for
// [Per] and its shorthands. A bucket built by [New] has no quota but its
// Config, and reports Capacity per [Bucket.Window], the time an empty
// bucket takes to refill: the quota at its long-run rate (to within the
// microsecond Window is rounded up to) whose Limit is the largest burst,
// and what ratelimit.Limiter.Quota reports for an algorithm that does not say,
// so that what adapters advertise for such a bucket is what they did
// before buckets had a Quota. Config{Capacity: 20, Rate: 2} reports 20 per
// 10s. The quota changes no decision, nor Spec.
func (b *Bucket) Quota() algorithm.Quota { return b.quota }

// Tag returns {Kind, capacity}: tokens at an instant mean the
// same whatever the rate.
func (b *Bucket) Tag() algorithm.Tag {
	return algorithm.Tag{Kind: Kind, P0: b.limit}
}

// Spec returns {"tokenbucket", [capacity, rate per second]}.
func (b *Bucket) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "tokenbucket", Params: []float64{b.capacity, b.rate}}
}

// String describes the bucket, for logs.
func (b *Bucket) String() string {
	return fmt.Sprintf("tokenbucket(capacity=%d, rate=%v/s)", b.limit, b.rate)
}

// A bucket's state is N0, the tokens it held at N1 (a float64's bits),
// and N1, the instant of that count (Unix µs). The tokens are below zero
// when the bucket is in debt: charged at N1 for bookings due later.

// NarrowState declares that the bucket's state is N0 and N1 alone (see
// algorithm.Narrow).
func (b *Bucket) NarrowState() {}

// Init returns a full bucket.
func (b *Bucket) Init(_ algorithm.State, now int64) algorithm.State {
	return algorithm.State{N0: int64(math.Float64bits(b.capacity)), N1: now}
}

func load(s algorithm.State) (tokens float64, last int64) {
	return math.Float64frombits(uint64(s.N0)), s.N1
}

// at returns the tokens a bucket holding tokens at last holds at now: those
// plus what refilled since, capped at capacity. Time going backwards adds
// nothing. The arithmetic is the Lua script's, operation for operation;
// the conversions keep Go from fusing the multiply and add.
func (b *Bucket) at(tokens float64, last, now int64) float64 {
	return min(tokens+float64(float64(max(now-last, 0))*b.perMicro), b.capacity)
}

// until returns the microseconds from now until a bucket that held tokens
// at last, and holds held at now, holds target (≤ capacity). It is exact:
// at the returned instant at() reaches target, one microsecond earlier it
// does not.
func (b *Bucket) until(tokens float64, last int64, held, target float64, now int64) int64 {
	if held >= target {
		return 0
	}
	return b.untilFrom(math.Ceil((target-tokens)*b.perToken), tokens, last, target, now)
}

// untilFrom is until from a first guess e at the microseconds from last,
// which may be off by a few µs either way without changing the result:
// the exact answer comes from the refill itself. The count of µs stays a
// float64 (a whole number below 2^53, so exactly what at() multiplies)
// until the end: converting it to an integer and back before each check
// would put two conversions more on the chain of dependent instructions
// every admitted decision waits on.
func (b *Bucket) untilFrom(e, tokens float64, last int64, target float64, now int64) int64 {
	for tokens+float64(e*b.perMicro) < target {
		e++
	}
	for e > 0 && tokens+float64((e-1)*b.perMicro) >= target {
		e--
	}
	return last + int64(e) - now
}

// Take takes cost tokens when the bucket holds at least that many at now.
// An admitted cost leaves the bucket holding held-cost at max(last, now),
// where it stands without refilling, so the result needs no second refill:
// what is left, and when the bucket is full again (from fullGuess).
func (b *Bucket) Take(s algorithm.State, now, cost int64) (algorithm.State, algorithm.Result) {
	tokens, last := load(s)
	held := b.at(tokens, last, now)
	c := float64(cost)
	if c > held {
		return b.report(tokens, last, held, c, now)
	}
	guess := b.fullGuess(tokens, last, c, now)
	left, last := held-c, max(last, now)
	return algorithm.State{N0: int64(math.Float64bits(left)), N1: last}, algorithm.Result{
		Remaining:  int64(left),
		ResetAfter: b.untilFrom(guess, left, last, b.capacity, now),
	}
}

// fullGuess is Take's first guess at the µs from max(last, now) until a
// bucket that held tokens at last, charged c at now, is full again.
//
// It is made from the state before the charge rather than from what the
// charge left: held-c ends the longest chain of dependent instructions in
// a decision (the clock, the refill since last, the charge), and a guess
// made from it would wait for all of it. Refilled from last, the bucket is
// full capacity-tokens+c tokens' worth of time later, of which now-last
// has passed; when the refill since last reached capacity, what is missing
// is c alone. Both guesses are within a µs or two of the answer (the
// refill's roundings are below 2^-52 of a fill time of at most
// algorithm.MaxDuration), and the larger is the one that applies.
func (b *Bucket) fullGuess(tokens float64, last int64, c float64, now int64) float64 {
	elapsed := float64(max(now-last, 0))
	return max(math.Ceil((b.capacity-tokens+c)*b.perToken)-elapsed, math.Ceil(c*b.perToken))
}

// Peek reports the bucket at now for a request of cost.
func (b *Bucket) Peek(s algorithm.State, now, cost int64) algorithm.Result {
	tokens, last := load(s)
	_, r := b.report(tokens, last, b.at(tokens, last, now), float64(cost), now)
	return r
}

// report is the decision for c without taking it, the bucket that held
// tokens at last holding held, and that bucket's state. It returns the
// state so that Take's denial ends in one call with nothing to keep
// across it (a denial returns s's own numbers, tokens being N0 as a
// float).
func (b *Bucket) report(tokens float64, last int64, held, c float64, now int64) (algorithm.State, algorithm.Result) {
	return algorithm.State{N0: int64(math.Float64bits(tokens)), N1: last}, algorithm.Result{
		Remaining:  remaining(held),
		RetryAfter: b.until(tokens, last, held, c, now),
		ResetAfter: b.until(tokens, last, held, b.capacity, now),
	}
}

// remaining is what Remaining reports of held tokens: the whole ones, and
// none while the bucket is in debt (int64 of a negative count would
// round toward zero, and the script's math.floor away from it).
func remaining(held float64) int64 {
	return max(int64(held), 0) // an integer max, which has no branch
}

// Book charges cost at now for an admission due at act (see
// algorithm.Booker). The bucket stays dated max(last, now), as after a
// Take, and holds what a Take at act would leave less what refills from
// then until act: from act on it reads as that Take's bucket, and before
// act it lends nothing that only exists at act. The tokens go below zero
// (a debt) when the refill until act pays for the cost; a debt deeper
// than 2^53 tokens (a booking years ahead of a bucket refilling millions
// a second) is cut there, where the script's range check reads it.
//
// The booked bucket refills from max(last, now), Take's from act: the
// same bucket, rounded on two paths, so that from act on the booked one
// may reach a count a µs before or after Take's does (the roundings are
// a few ulps of the capacity and the debt, a µs of refill is at least
// 2^-48 of the capacity). Owing a margin on top would make every booking
// a µs late, and a queue of them later by a µs a booking.
func (b *Bucket) Book(s algorithm.State, now, act, cost int64) (algorithm.State, algorithm.Result) {
	tokens, last := load(s)
	held := b.at(tokens, last, act)
	last = max(last, now)
	owed := float64(float64(max(act-last, 0)) * b.perMicro)
	left := max(held-float64(cost)-owed, -maxTokens)
	next := algorithm.State{N0: int64(math.Float64bits(left)), N1: last}
	r := b.Peek(next, now, 1)
	r.RetryAfter = act - now
	return next, r
}

// Refund gives back up to n tokens: the bucket at now holds n more, up to
// its capacity. A full bucket has nothing to give back. A sum that rounds
// up to a whole count n+1 above held's (3.9999999999999996 + 6 is 10 in
// float64) is taken a float lower, so that no more than n whole tokens
// come back.
//
// A bucket in debt gives nothing back: its debt is bookings not yet due,
// which only their Reservation gives back (Cancel).
func (b *Bucket) Refund(s algorithm.State, now, n int64) (algorithm.State, algorithm.Result) {
	tokens, last := load(s)
	if b.at(tokens, last, now) < 0 {
		n = 0
	}
	next, _, r := b.give(s, now, n)
	return next, r
}

// Undo gives back up to n of an admission of cost due at act (see
// algorithm.Undoer): for the state the admission left (exact), n tokens,
// which it alone took; otherwise before act up to its Unused, and at or
// after act x/time/rate's CancelAt bound, n less the refill since act,
// n − rate·(now − act), rounded down: the key would hold no more had the
// admission cost n less, since the tokens it took are lost only while
// that bucket sat full, at most the refill since act. Exact at act, less
// as time passes, never more; up to the capacity. A bucket in debt gives
// nothing back but exactly: bookings made since counted on the refill
// until they are due, which the bound does not cover, and a debt given
// back would hide them from Refund. What it gave back is the tokens it
// put back, a fraction counting whole.
func (b *Bucket) Undo(s algorithm.State, now, act, cost, n int64, exact bool) (algorithm.State, int64, algorithm.Result) {
	n = min(n, cost)
	var give int64
	switch tokens, last := load(s); {
	case exact:
		give = n
	case act > now:
		give = min(n, b.Unused(s, now, act, cost))
	case b.at(tokens, last, now) >= 0:
		if left := float64(float64(n) - float64(float64(now-act)*b.perMicro)); left >= 1 {
			give = min(int64(left), n)
		}
	}
	return b.give(s, now, give)
}

// give puts up to n tokens back, up to the capacity, and returns how many
// it put back: n, or the room the bucket had when that is less, a
// fraction of a token counting whole.
func (b *Bucket) give(s algorithm.State, now, n int64) (algorithm.State, int64, algorithm.Result) {
	tokens, last := load(s)
	held := b.at(tokens, last, now)
	if held >= b.capacity || n < 1 {
		return algorithm.State{N0: s.N0, N1: s.N1}, 0, b.Peek(s, now, 1)
	}
	given := n
	if room := math.Ceil(b.capacity - held); room < float64(n) {
		given = int64(room)
	}
	left := min(held+float64(n), b.capacity)
	if remaining(left)-remaining(held) > n {
		left = math.Nextafter(left, math.Inf(-1))
	}
	next := algorithm.State{N0: int64(math.Float64bits(left)), N1: max(last, now)}
	return next, given, b.Peek(next, now, 1)
}

// Owe charges n more tokens at now (see algorithm.Settler), below zero if
// need be: a debt that refills at the bucket's rate. The debt is cut where
// refilling it would take longer than algorithm.MaxDuration (a state
// already deeper stays as it is).
func (b *Bucket) Owe(s algorithm.State, now, act, n int64) (algorithm.State, algorithm.Result) {
	tokens, last := load(s)
	held := b.at(tokens, last, now)
	floor := -float64(float64(algorithm.MaxDuration) * b.perMicro)
	left := max(held-float64(n), min(held, floor), -maxTokens)
	next := algorithm.State{N0: int64(math.Float64bits(left)), N1: max(last, now)}
	return next, b.Peek(next, now, 1)
}

// Unused returns how much of a booking of cost due at act the bucket may
// give back at now, by x/time/rate's rule: the cost, less what later
// bookings consumed of the refill after act. Bookings after this one keep
// the bucket in debt past act, until the last of them is due: the debt
// still owed at act, −(tokens at act), is that refill, rate·(end of the
// debt − act). What is left is rounded to the nearest whole token (a tie
// down): booking instants are whole microseconds, which leave a later
// booking's charge a fraction of a µs's refill short of whole, and the
// float arithmetic of a deep debt a few ulps either way.
func (b *Bucket) Unused(s algorithm.State, now, act, cost int64) int64 {
	if act <= now {
		return 0
	}
	tokens, last := load(s)
	due := b.at(tokens, last, act)
	if due >= 0 {
		return cost
	}
	return max(int64(math.Ceil(float64(cost)+due-0.5)), 0)
}

// IntervalConfig configures a bucket refilled by whole tokens on a schedule.
type IntervalConfig struct {
	// Capacity is the most tokens the bucket holds. 1 ≤ Capacity ≤ algorithm.MaxLimit.
	Capacity int64
	// Tokens is how many tokens each interval adds, at least 1.
	Tokens int64
	// Interval is how often Tokens are added, at least 1µs; it is truncated
	// to whole microseconds. Refilling an empty bucket must take at most
	// algorithm.MaxDuration.
	Interval time.Duration
}

// IntervalBucket adds whole tokens at the end of every interval. Create it
// with [NewInterval] or [IntervalPer].
//
// The instant of the last refill advances by whole intervals, so time spent
// toward the next refill is kept across requests. A bucket that is full
// gains nothing from waiting, so a refill that fills it restarts the
// interval at that instant: a full bucket is the same as a new one.
type IntervalBucket struct {
	capacity int64
	tokens   int64
	interval int64           // µs
	quota    algorithm.Quota // what Quota reports; no decision reads it
}

var (
	_ algorithm.Narrow  = (*IntervalBucket)(nil)
	_ algorithm.Quoter  = (*IntervalBucket)(nil)
	_ algorithm.Settler = (*IntervalBucket)(nil)
)

// NewInterval returns a bucket of cfg.Capacity tokens that gains cfg.Tokens
// every cfg.Interval, or an error wrapping algorithm.ErrInvalidConfig.
func NewInterval(cfg IntervalConfig) (*IntervalBucket, error) {
	if err := algorithm.CheckLimit("tokenbucket: Capacity", cfg.Capacity); err != nil {
		return nil, err
	}
	if err := algorithm.CheckLimit("tokenbucket: Tokens", cfg.Tokens); err != nil {
		return nil, err
	}
	interval := cfg.Interval.Microseconds()
	if err := algorithm.CheckDuration("tokenbucket: Interval", interval); err != nil {
		return nil, err
	}
	steps := (cfg.Capacity + cfg.Tokens - 1) / cfg.Tokens
	if steps > algorithm.MaxDuration/interval {
		return nil, fmt.Errorf("%w: tokenbucket: refilling %d tokens by %d every %v takes longer than %v",
			algorithm.ErrInvalidConfig, cfg.Capacity, cfg.Tokens, cfg.Interval, time.Duration(algorithm.MaxDuration)*time.Microsecond)
	}
	b := &IntervalBucket{capacity: cfg.Capacity, tokens: cfg.Tokens, interval: interval}
	b.quota = algorithm.Quota{Limit: cfg.Capacity, Window: b.Window()}
	return b, nil
}

// Limit returns the capacity.
func (b *IntervalBucket) Limit() int64 { return b.capacity }

// Window returns how long an empty bucket takes to refill: ⌈Capacity/Tokens⌉
// intervals.
func (b *IntervalBucket) Window() time.Duration {
	return time.Duration(ceilDiv(b.capacity, b.tokens)*b.interval) * time.Microsecond
}

// Quota returns the quota the bucket was built with: n per period for
// [IntervalPer]. A bucket built by [NewInterval] reports Capacity per
// [IntervalBucket.Window], the time an empty bucket takes to refill, as a
// Config-built [Bucket] does and for the same reasons. When Tokens does
// not divide Capacity, that quota's rate is below the long-run rate (the
// last interval of a refill adds more than fits); it is what an empty
// bucket gets back, and what adapters advertised before. The quota
// changes no decision, nor Spec.
func (b *IntervalBucket) Quota() algorithm.Quota { return b.quota }

// Tag returns {IntervalKind, capacity}: tokens and the instant of the last
// refill mean the same whatever the schedule.
func (b *IntervalBucket) Tag() algorithm.Tag {
	return algorithm.Tag{Kind: IntervalKind, P0: b.capacity}
}

// Spec returns {"tokenbucket-interval", [capacity, tokens, interval µs]}.
func (b *IntervalBucket) Spec() algorithm.Spec {
	return algorithm.Spec{Name: "tokenbucket-interval",
		Params: []float64{float64(b.capacity), float64(b.tokens), float64(b.interval)}}
}

// String describes the bucket, for logs.
func (b *IntervalBucket) String() string {
	return fmt.Sprintf("tokenbucket(capacity=%d, +%d every %v)", b.capacity, b.tokens,
		time.Duration(b.interval)*time.Microsecond)
}

// An interval bucket's state is N0, the tokens it holds, and N1, the
// instant of its last refill (Unix µs). The tokens are below zero when the
// bucket is in debt: charged for bookings due later.

// NarrowState declares that the bucket's state is N0 and N1 alone (see
// algorithm.Narrow).
func (b *IntervalBucket) NarrowState() {}

// Init returns a full bucket.
func (b *IntervalBucket) Init(_ algorithm.State, now int64) algorithm.State {
	return algorithm.State{N0: b.capacity, N1: now}
}

// at returns the bucket, holding tokens since its refill at last, refilled
// up to now. Refilling twice gives what refilling once does.
func (b *IntervalBucket) at(tokens, last, now int64) (int64, int64) {
	if tokens >= b.capacity {
		return b.capacity, max(last, now)
	}
	if now <= last {
		return tokens, last
	}
	ticks := (now - last) / b.interval
	if need := ceilDiv(b.capacity-tokens, b.tokens); ticks >= need {
		return b.capacity, now
	}
	return tokens + ticks*b.tokens, last + ticks*b.interval
}

// until returns the microseconds from now until a bucket holding tokens
// since last holds target, or 0 if it already does.
func (b *IntervalBucket) until(tokens, last, target, now int64) int64 {
	if tokens >= target {
		return 0
	}
	return last + ceilDiv(target-tokens, b.tokens)*b.interval - now
}

// Take takes cost tokens when the bucket holds at least that many at now.
// at has already moved last to the latest refill, so the bucket left
// behind refills nothing more at now.
func (b *IntervalBucket) Take(s algorithm.State, now, cost int64) (algorithm.State, algorithm.Result) {
	tokens, last := b.at(s.N0, s.N1, now)
	if cost > tokens {
		return algorithm.State{N0: s.N0, N1: s.N1}, b.report(tokens, last, cost, now)
	}
	left := tokens - cost
	return algorithm.State{N0: left, N1: last}, b.report(left, last, 0, now)
}

// Peek reports the bucket at now for a request of cost.
func (b *IntervalBucket) Peek(s algorithm.State, now, cost int64) algorithm.Result {
	tokens, last := b.at(s.N0, s.N1, now)
	return b.report(tokens, last, cost, now)
}

func (b *IntervalBucket) report(tokens, last, cost, now int64) algorithm.Result {
	return algorithm.Result{
		Remaining:  max(tokens, 0), // none while in debt
		RetryAfter: b.until(tokens, last, cost, now),
		ResetAfter: b.until(tokens, last, b.capacity, now),
	}
}

// Book charges cost at now for an admission due at act (see
// algorithm.Booker): the same as Bucket.Book in whole tokens and refills.
// A Take at act would leave H − cost tokens since the refill at la (la is
// act itself when the bucket is full by then: a full bucket restarts its
// interval). The booked bucket keeps la's schedule but is dated the
// ticks whole intervals before la that bring it back to at most
// max(last refill, now), less than an interval before, so that nothing
// refills it at now; it holds ticks refills less: from act on it reads as
// that Take's bucket, and before act it lends nothing. When the bucket is
// not full by act, that is the bucket at now charged cost, below zero if
// need be. A debt deeper than 2^53 tokens (years of refills at millions
// of tokens a µs) is cut there, where the script's range check reads it.
func (b *IntervalBucket) Book(s algorithm.State, now, act, cost int64) (algorithm.State, algorithm.Result) {
	tokens, last := b.at(s.N0, s.N1, now)
	held, la := b.at(tokens, last, act)
	ticks := ceilDiv(la-max(last, now), b.interval) // la−max(last, now) > −interval
	owed := int64(maxTokens)
	if ticks <= maxTokens/b.tokens {
		owed = ticks * b.tokens
	}
	next := algorithm.State{N0: held - cost - owed, N1: la - ticks*b.interval}
	r := b.Peek(next, now, 1)
	r.RetryAfter = act - now
	return next, r
}

// Refund gives back up to n tokens: the bucket at now holds n more, up to
// its capacity. A full bucket has nothing to give back.
//
// A bucket in debt gives nothing back: its debt is bookings not yet due,
// which only their Reservation gives back (Cancel).
func (b *IntervalBucket) Refund(s algorithm.State, now, n int64) (algorithm.State, algorithm.Result) {
	if tokens, _ := b.at(s.N0, s.N1, now); tokens < 0 {
		n = 0
	}
	next, _, r := b.give(s, now, n)
	return next, r
}

// Undo gives back up to n of an admission of cost due at act (see
// algorithm.Undoer): for the state the admission left (exact), n tokens;
// otherwise before act up to its Unused, and at or after it n less Tokens
// for each refill that can have come since act, ⌈(now − act)/Interval⌉
// of them (Bucket.Undo's bound in whole refills): never more than the key
// would hold had the admission cost n less; up to the capacity. A bucket
// in debt gives nothing back but exactly, as Bucket.Undo.
func (b *IntervalBucket) Undo(s algorithm.State, now, act, cost, n int64, exact bool) (algorithm.State, int64, algorithm.Result) {
	n = min(n, cost)
	var give int64
	switch tokens, _ := b.at(s.N0, s.N1, now); {
	case exact:
		give = n
	case act > now:
		give = min(n, b.Unused(s, now, act, cost))
	case tokens >= 0:
		if ticks := ceilDiv(now-act, b.interval); ticks < ceilDiv(n, b.tokens) {
			give = n - ticks*b.tokens
		}
	}
	return b.give(s, now, give)
}

// give puts up to n tokens back, up to the capacity, and returns how many
// it put back.
func (b *IntervalBucket) give(s algorithm.State, now, n int64) (algorithm.State, int64, algorithm.Result) {
	tokens, last := b.at(s.N0, s.N1, now)
	if tokens >= b.capacity || n < 1 {
		return algorithm.State{N0: s.N0, N1: s.N1}, 0, b.Peek(s, now, 1)
	}
	left, given := b.capacity, b.capacity-tokens
	if n < b.capacity-tokens { // not tokens+n: n may be as large as anyone asks
		left, given = tokens+n, n
	}
	next := algorithm.State{N0: left, N1: last}
	return next, given, b.Peek(next, now, 1)
}

// Owe charges n more tokens at now (see algorithm.Settler), below zero if
// need be: a debt that whole refills pay off. The debt is cut where
// refilling it would take longer than algorithm.MaxDuration (a state
// already deeper stays as it is).
func (b *IntervalBucket) Owe(s algorithm.State, now, act, n int64) (algorithm.State, algorithm.Result) {
	tokens, last := b.at(s.N0, s.N1, now)
	floor := -int64(maxTokens)
	if ticks := algorithm.MaxDuration / b.interval; ticks <= maxTokens/b.tokens {
		floor = -ticks * b.tokens
	}
	left := min(tokens, floor)
	if n < tokens-left { // not tokens−n: n may be as large as anyone asks
		left = tokens - n
	}
	next := algorithm.State{N0: left, N1: last}
	return next, b.Peek(next, now, 1)
}

// Unused returns how much of a booking of cost due at act the bucket may
// give back at now: all of it while nothing is booked after it (the
// bucket holds no debt at act); otherwise nothing. A later booking is due
// at a refill, and the refills between act and it may fill the bucket to
// its capacity, which then absorbs the booking's units: x/time/rate's rule
// (the cost less the debt still owed at act, as Bucket.Unused gives back)
// would give them back a second time (found by FuzzSettle: 67 tokens, 76
// a second, 49 booked for the next refill and 22 for the one after, whose
// refills fill the bucket either way).
func (b *IntervalBucket) Unused(s algorithm.State, now, act, cost int64) int64 {
	if act <= now {
		return 0
	}
	tokens, last := b.at(s.N0, s.N1, now)
	if due, _ := b.at(tokens, last, act); due < 0 {
		return 0
	}
	return cost
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
