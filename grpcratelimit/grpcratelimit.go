// Package grpcratelimit limits gRPC calls with ratelimit Limiters and
// Policies. It is a module of its own, so that the library's users who do
// not use gRPC never have it in their module graph.
//
// An [Interceptor] charges each call to a Limiter or a Policy, under a key
// taken from the call (the client's address, a metadata entry, the
// method), at a cost chosen per method:
//
//	in, err := grpcratelimit.New(lim, grpcratelimit.Metadata("x-api-key"),
//		grpcratelimit.WithCost(func(method string) int { ... }))
//	srv := grpc.NewServer(grpc.UnaryInterceptor(in.Unary()), grpc.StreamInterceptor(in.Stream()))
//
// [NewPolicy] charges every limit of a Policy, or none, in one decision
// (one round trip to Redis); [NewResolver] picks the key and the policy
// per call (per method, per tenant), or none, so that one interceptor
// holds every limit of a server.
//
// A denied call fails with codes.ResourceExhausted and a
// google.rpc.RetryInfo detail whose retry_delay is the decision's
// RetryAfter, exactly: for a policy, the longest any denying limit asks
// for. A stream is charged once, when it opens. Every decided call's
// response header metadata carries the IETF rate-limit fields, as
// httplimit writes them for HTTP, one list item per limit:
//
//	ratelimit-policy: "burst";q=10;w=10, "daily";q=1000;w=86400
//	ratelimit: "burst";r=7;t=3, "daily";r=912;t=30125
//
// A store failure follows the limiter's failure policy
// (ratelimit.WithFailurePolicy), as in httplimit; under FailWithError the
// call fails with codes.Unavailable and a message that reveals nothing of
// the error.
//
// On the client side, [Interceptor.UnaryClient] and
// [Interceptor.StreamClient] wait until the limiter admits a call before
// sending it, so that a client keeps under a server's quota.
//
// [Interceptor.Limit] fits the one-method limiter interface of
// go-grpc-middleware v2's ratelimit interceptors.
package grpcratelimit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/httplimit"
)

// ErrNoKey reports a call that carries no key for the KeyFunc: no peer
// address, or no metadata entry of that name. The default error handler
// answers it with codes.InvalidArgument.
var ErrNoKey = errors.New("grpcratelimit: no rate-limit key in the call")

// KeyFunc returns the key a call is limited by. fullMethod is the call's
// method, "/package.Service/Method". An error fails the call through the
// interceptor's error handler; an error carrying a gRPC status (from
// status.Error) is answered with that status by the default handler.
type KeyFunc[K comparable] func(ctx context.Context, fullMethod string) (K, error)

// PeerAddr keys calls by the IP address of the client's connection (IPv4
// addresses mapped to IPv6 are unmapped). A peer without an IP address (a
// Unix socket, an in-process connection) is ErrNoKey.
//
// Behind a proxy every call has the proxy's address; key by a metadata entry
// the proxy sets instead, if it sets one that clients cannot.
func PeerAddr(ctx context.Context, _ string) (netip.Addr, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}, fmt.Errorf("%w: no peer", ErrNoKey)
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return ip.Unmap(), nil
		}
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: peer address %q is not an IP address", ErrNoKey, p.Addr.String())
	}
	return ap.Addr().Unmap(), nil
}

// Metadata returns a KeyFunc keying calls by the first value of the
// incoming metadata entry name (such as "x-api-key"; names are
// case-insensitive). A call without it, or with an empty value, is
// ErrNoKey.
func Metadata(name string) KeyFunc[string] {
	return func(ctx context.Context, _ string) (string, error) {
		vs := metadata.ValueFromIncomingContext(ctx, name)
		if len(vs) == 0 || vs[0] == "" {
			return "", fmt.Errorf("%w: no metadata %q", ErrNoKey, name)
		}
		return vs[0], nil
	}
}

// Method keys calls by their full method name: one limit per method,
// shared by every client.
func Method(_ context.Context, fullMethod string) (string, error) {
	return fullMethod, nil
}

// Resolver picks the key of a call to fullMethod and the policy that
// applies to it: per method, per tenant named in the metadata, or both. A
// nil policy lets the call through unlimited. An error fails the call
// through the interceptor's error handler. Policies are made once (per
// method or tier, say) and reused: the interceptor keeps the metadata
// fields that describe each one it sees.
//
// A Policy's quota is its name (ratelimit.WithName): one Policy picked for
// two methods is one quota per key (put the method in the key to count
// them apart), and policies built apart share only under one name.
type Resolver[K comparable] func(ctx context.Context, fullMethod string) (key K, policy *ratelimit.Policy[K], err error)

// Interceptor limits gRPC calls with a Limiter or Policies. Create it with
// [New], [NewPolicy] or [NewResolver]; it is safe for concurrent use.
type Interceptor[K comparable] struct {
	resolve func(ctx context.Context, fullMethod string) (K, limits[K], error)
	config
	fields httplimit.FieldsCache[K] // the fields of the limiters and policies met
}

// limits is what the interceptor charges a call: a Limiter or a Policy.
type limits[K comparable] struct {
	lim    *ratelimit.Limiter[K] // from New: fields under the Limiter's name
	policy *ratelimit.Policy[K]  // from NewPolicy or a Resolver: under its limits' names
}

// limiter returns the Limiter that decides.
func (ls limits[K]) limiter() *ratelimit.Limiter[K] {
	if ls.lim != nil {
		return ls.lim
	}
	return ls.policy
}

type config struct {
	cost     func(fullMethod string) int
	refundIf func(err error) bool                                                  // WithRefund's; nil: none
	settleTo func(ctx context.Context, fullMethod string, resp any, err error) int // WithSettle's; nil: none
	dryRun   bool
	onError  func(ctx context.Context, fullMethod string, err error) error
}

// Option configures an Interceptor.
type Option func(*config)

// WithCost sets the cost of a call by its method (default 1 for every
// method). A cost of 0 lets the call through without charging it or
// resolving its key, for methods that should never be limited, such as
// health checks. A cost above the limiter's limit fails the call with
// codes.ResourceExhausted and no RetryInfo, since retrying never helps; a
// negative cost fails it through the error handler with
// ratelimit.ErrInvalidCost.
func WithCost(cost func(fullMethod string) int) Option {
	return func(c *config) {
		if cost != nil {
			c.cost = cost
		}
	}
}

// WithRefund gives back a served call's cost when the handler's error
// satisfies refund (err is nil for a call that succeeded), so that only
// some calls count: refund successes to count failed logins alone, or
// refund codes.Internal so that clients are not charged for the server's
// failures. Each call is then admitted as a reservation at now (ReserveN
// with no delay), and a refund gives back that admission alone
// (Reservation.Refund): never another call's booking, nor into a window
// that no longer counts. The refund is one more store call, after the
// handler returns, with the call's context freed of its cancellation; a
// store error there is dropped (the call has been answered). Server interceptors
// only; a call admitted in dry-run mode past a denial, or by a failure
// policy (the store did not charge it), is not refunded.
func WithRefund(refund func(err error) bool) Option {
	return func(c *config) { c.refundIf = refund }
}

// WithSettle charges a served call what it cost, once the handler has
// returned: cost gets the call's context, its method, the handler's
// response (nil for a stream, or when it failed) and error, and returns
// the cost (WithCost's was the estimate charged to admit the call). An
// LLM service returns the token count its response reports. The call's
// reservation is settled to it (ratelimit.Reservation.Settle): less is
// given back as WithRefund gives back, more is charged past the limit, a
// debt the key's next calls wait out. A negative cost leaves the charge
// as it is. Each call is admitted as a reservation at now, as with
// WithRefund, and the settle is one more store call after the handler
// returns, with the call's context freed of its cancellation (a store
// error there is dropped: the call has been answered); WithRefund's
// refund, when it applies, comes instead. Server interceptors only; a
// call the store did not charge (dry run past a denial, a failure
// policy) is not settled.
func WithSettle(cost func(ctx context.Context, fullMethod string, resp any, err error) int) Option {
	return func(c *config) { c.settleTo = cost }
}

// WithDryRun runs the server interceptors in dry-run (shadow) mode: calls
// are charged as usual, but one that the limit denies is passed on, its
// decision marked DryRunDenied (see DecisionFrom). The limiter's own
// ratelimit.WithDryRun does the same for every user of the limiter.
func WithDryRun() Option {
	return func(c *config) { c.dryRun = true }
}

// WithErrorHandler sets how a call fails when no decision could be made:
// the KeyFunc or Resolver failed, or the limiter returned an error (a
// store failure under ratelimit.FailWithError, a negative cost, the call's
// context ending). h returns the error to fail the call with, normally one made by
// status.Error. The default answers with the status of an error that
// carries one, codes.Canceled or codes.DeadlineExceeded when the call's
// context ended, codes.InvalidArgument for ErrNoKey and ErrKeyTooLong,
// codes.Unavailable for store failures (ErrStoreUnavailable, ErrStoreFull),
// codes.ResourceExhausted for ErrTooManyStates (the key holds the most
// limits a store keeps for one key),
// codes.Internal for ErrStateMismatch (a misconfigured limiter: the
// server's fault, which a retry does not outlast) and codes.Internal
// otherwise, in messages that reveal nothing of the error.
func WithErrorHandler(h func(ctx context.Context, fullMethod string, err error) error) Option {
	return func(c *config) {
		if h != nil {
			c.onError = h
		}
	}
}

// New returns an interceptor charging lim for the key that key returns,
// under its name (ratelimit.WithName, "default" when it has none) in the
// metadata fields. A nil lim or key
// is an error wrapping ratelimit.ErrInvalidConfig.
func New[K comparable](lim *ratelimit.Limiter[K], key KeyFunc[K], opts ...Option) (*Interceptor[K], error) {
	if lim == nil {
		return nil, fmt.Errorf("%w: grpcratelimit: nil Limiter", ratelimit.ErrInvalidConfig)
	}
	return newKeyed(limits[K]{lim: lim}, key, opts)
}

// NewPolicy returns an interceptor charging every limit of p, or none, for
// the key that key returns: one decision, one round trip to a Redis store,
// however many limits p has. A nil p or key is an error wrapping
// ratelimit.ErrInvalidConfig.
func NewPolicy[K comparable](p *ratelimit.Policy[K], key KeyFunc[K], opts ...Option) (*Interceptor[K], error) {
	if p == nil {
		return nil, fmt.Errorf("%w: grpcratelimit: nil Policy", ratelimit.ErrInvalidConfig)
	}
	return newKeyed(limits[K]{policy: p}, key, opts)
}

// NewResolver returns an interceptor charging, for each call, the policy
// that resolve picks, under the key it picks: every limit of the policy or
// none, atomically, as NewPolicy does. A nil resolve is an error wrapping
// ratelimit.ErrInvalidConfig.
func NewResolver[K comparable](resolve Resolver[K], opts ...Option) (*Interceptor[K], error) {
	if resolve == nil {
		return nil, fmt.Errorf("%w: grpcratelimit: nil Resolver", ratelimit.ErrInvalidConfig)
	}
	return newInterceptor(func(ctx context.Context, fullMethod string) (K, limits[K], error) {
		k, p, err := resolve(ctx, fullMethod)
		return k, limits[K]{policy: p}, err
	}, opts), nil
}

// NewLimiterResolver returns an interceptor charging, for each call, the
// limiter that resolve picks, under the key it picks: a limit per tenant,
// say, with ratelimit.Limiter.With of the tenant's plan. A nil limiter
// lets the call through unlimited. A nil resolve is an error wrapping
// ratelimit.ErrInvalidConfig.
func NewLimiterResolver[K comparable](resolve func(ctx context.Context, fullMethod string) (K, *ratelimit.Limiter[K], error), opts ...Option) (*Interceptor[K], error) {
	if resolve == nil {
		return nil, fmt.Errorf("%w: grpcratelimit: nil resolver", ratelimit.ErrInvalidConfig)
	}
	return newInterceptor(func(ctx context.Context, fullMethod string) (K, limits[K], error) {
		k, lim, err := resolve(ctx, fullMethod)
		return k, limits[K]{lim: lim}, err
	}, opts), nil
}

// newKeyed returns an interceptor charging ls for the key that key returns.
func newKeyed[K comparable](ls limits[K], key KeyFunc[K], opts []Option) (*Interceptor[K], error) {
	if key == nil {
		return nil, fmt.Errorf("%w: grpcratelimit: nil KeyFunc", ratelimit.ErrInvalidConfig)
	}
	return newInterceptor(func(ctx context.Context, fullMethod string) (K, limits[K], error) {
		k, err := key(ctx, fullMethod)
		return k, ls, err
	}, opts), nil
}

func newInterceptor[K comparable](resolve func(context.Context, string) (K, limits[K], error), opts []Option) *Interceptor[K] {
	in := &Interceptor[K]{resolve: resolve, config: config{
		cost:    func(string) int { return 1 },
		onError: defaultError,
	}}
	for _, o := range opts {
		o(&in.config)
	}
	return in
}

type decisionKey struct{}

// DecisionFrom returns the decision the server interceptor made for the
// call whose context ctx is, so that the handler can use it (to log it, or
// to tell a dry-run denial); for a policy, the policy's combined decision,
// with each limit's in its Limits. ok is false outside the interceptor,
// for calls of cost 0 and for calls a Resolver left unlimited.
func DecisionFrom(ctx context.Context) (d ratelimit.Decision, ok bool) {
	if d, ok := ctx.Value(decisionKey{}).(*ratelimit.Decision); ok {
		return *d, true
	}
	return ratelimit.Decision{}, false
}

// PolicyDecisionFrom is DecisionFrom, by the name it had when a policy's
// decision had a type of its own.
func PolicyDecisionFrom(ctx context.Context) (d ratelimit.Decision, ok bool) {
	return DecisionFrom(ctx)
}

// admit decides a call to fullMethod. It returns the context to serve the
// call with, or the error to fail it with. A decided call's header
// metadata gets the rate-limit fields.
func (in *Interceptor[K]) admit(ctx context.Context, fullMethod string) (context.Context, error) {
	cost := in.cost(fullMethod)
	if cost == 0 {
		return ctx, nil
	}
	key, ls, err := in.resolve(ctx, fullMethod)
	if err != nil {
		return nil, in.onError(ctx, fullMethod, err)
	}
	if ls.lim == nil && ls.policy == nil {
		return ctx, nil // unlimited
	}
	if in.refundIf != nil || in.settleTo != nil || in.fieldsOf(ls).Holds() {
		return in.admitRefundable(ctx, fullMethod, key, ls, cost)
	}
	c := &decided{Context: ctx}
	err = ls.limiter().AllowNInto(ctx, key, cost, &c.d)
	if err := in.settle(ctx, fullMethod, ls, &c.d, &c.fields, err); err != nil {
		return nil, err
	}
	return c, nil
}

// admitRefundable is admit under WithRefund or WithSettle, or for limits
// that hold (an in-flight limit): the call is admitted as a reservation at
// now, whose Refund gives back that admission alone, whose Settle changes
// its cost, and whose Release frees its slots when the handler returns.
func (in *Interceptor[K]) admitRefundable(ctx context.Context, fullMethod string, key K, ls limits[K], cost int) (context.Context, error) {
	res, err := ls.limiter().ReserveN(ctx, key, cost, 0)
	var d ratelimit.Decision
	if err == nil {
		d = res.Decision()
	}
	c := &decided{Context: ctx}
	if err := in.settle(ctx, fullMethod, ls, &d, &c.fields, err); err != nil {
		return nil, err
	}
	c.d, c.refund, c.settleTo, c.release = d, res.Refund, res.Settle, res.Release
	return c, nil
}

// settle handles d, the decision of a call to fullMethod by ls, or err,
// the error that left it undecided. It returns the error to fail the call
// with, if any. It sets the call's header metadata fields, whose values it
// keeps in fields, and in dry-run mode it marks a denial as such.
func (in *Interceptor[K]) settle(ctx context.Context, fullMethod string, ls limits[K], d *ratelimit.Decision, fields *[2]string, err error) error {
	if errors.Is(err, ratelimit.ErrCostExceedsLimit) {
		return status.Error(codes.ResourceExhausted, "the call costs more than the rate limit can ever admit")
	}
	if err != nil {
		return in.onError(ctx, fullMethod, err)
	}
	f := in.fieldsOf(ls)
	// Outside a server (no stream in ctx) there is nowhere to put them,
	// nor once the handler has sent its header (SetHeader fails). A
	// failure policy's decision advertises no quota: what is left is not
	// known.
	if st := grpc.ServerTransportStreamFromContext(ctx); st != nil && d.Source() == ratelimit.FromStore {
		*fields = [2]string{f.Policy(), f.RateLimit(d)}
		_ = st.SetHeader(metadata.MD{"ratelimit-policy": fields[0:1:1], "ratelimit": fields[1:2:2]})
	}
	if !d.Allowed() {
		if !in.dryRun {
			return exhausted(*d, f.Name(d.Binding()))
		}
		// Passed on: every denying decision is marked, as a dry-run
		// Limiter's would be.
		*d = d.DryRun()
	}
	return nil
}

// decided is the context of a decided call: its parent with the decision,
// for DecisionFrom, as context.WithValue would make it. The values of the
// call's metadata fields share its allocation.
type decided struct {
	context.Context
	d        ratelimit.Decision
	fields   [2]string                            // ratelimit-policy, ratelimit
	refund   func(context.Context) (int64, error) // WithRefund's: gives back the admission
	settleTo func(context.Context, int) error     // WithSettle's: makes its cost another
	release  func(context.Context) (int64, error) // frees the call's slots (a limit that holds)
}

func (c *decided) Value(key any) any {
	if _, ok := key.(decisionKey); ok {
		return &c.d
	}
	return c.Context.Value(key)
}

// String describes c as context.WithValue's contexts describe themselves.
func (c *decided) String() string {
	parent := fmt.Sprintf("%T", c.Context)
	if s, ok := c.Context.(fmt.Stringer); ok {
		parent = s.String()
	}
	return parent + ".WithValue(grpcratelimit.decisionKey, " + fmt.Sprint(&c.d) + ")"
}

// fieldsOf returns the metadata fields of ls, made once per limiter or
// policy and configuration of its limits.
func (in *Interceptor[K]) fieldsOf(ls limits[K]) *httplimit.Fields {
	if ls.lim != nil {
		return in.fields.Limiter(ls.lim)
	}
	return in.fields.Policy(ls.policy)
}

// Limit decides the call whose server context ctx is, for the method
// grpc.Method(ctx) reports, and returns nil when it is admitted, or the
// status error the interceptors would fail it with. It fits
// go-grpc-middleware v2's ratelimit.Limiter interface (which turns any
// error into codes.ResourceExhausted, dropping RetryInfo). That interface
// says nothing when the call ends: a slot of an in-flight limit taken
// here is held until its lease ends, so use Unary and Stream for those.
func (in *Interceptor[K]) Limit(ctx context.Context) error {
	method, _ := grpc.Method(ctx)
	_, err := in.admit(ctx, method)
	return err
}

// Unary returns the server interceptor for unary calls.
func (in *Interceptor[K]) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := in.admit(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		defer release(ctx)
		resp, err := handler(ctx, req)
		in.settleRefund(ctx, info.FullMethod, resp, err)
		return resp, err
	}
}

// settleRefund gives back the cost of the call whose context (as admit
// returned it) ctx is, when WithRefund asks for it on the handler's err,
// or else settles it to what WithSettle's func says resp and err cost.
func (in *Interceptor[K]) settleRefund(ctx context.Context, fullMethod string, resp any, err error) {
	refund := in.refundIf != nil && in.refundIf(err)
	if !refund && in.settleTo == nil {
		return
	}
	if in.cost(fullMethod) == 0 {
		return
	}
	var give func(context.Context) (int64, error)
	var settle func(context.Context, int) error
	if c, ok := ctx.(*decided); ok && !c.d.DryRunDenied() && c.d.Source() == ratelimit.FromStore {
		give, settle = c.refund, c.settleTo
	}
	if give == nil {
		return // unlimited, passed on uncharged in dry-run mode, or the failure policy's
	}
	if refund {
		_, _ = give(context.WithoutCancel(ctx))
		return
	}
	if n := in.settleTo(ctx, fullMethod, resp, err); n >= 0 {
		_ = settle(context.WithoutCancel(ctx), n)
	}
}

// release frees the slots that the limits that hold (an in-flight limit)
// took for the call whose context (as admit returned it) ctx is: the
// server interceptors defer it, so that it runs when the handler returns
// or panics. A store error is dropped: the call has been answered, and
// the slot is freed when its lease ends.
func release(ctx context.Context) {
	if c, ok := ctx.(*decided); ok && c.release != nil {
		_, _ = c.release(context.WithoutCancel(ctx))
	}
}

// Stream returns the server interceptor for streams, charged once when
// they open, and holding a slot of an in-flight limit while they last.
func (in *Interceptor[K]) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := in.admit(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		defer release(ctx)
		err = handler(srv, contextStream{ss, ctx})
		in.settleRefund(ctx, info.FullMethod, nil, err)
		return err
	}
}

// contextStream is a ServerStream with the context of the decision.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s contextStream) Context() context.Context { return s.ctx }

// wait waits until the limiter or policy admits a call of the client. When
// a limit holds (an in-flight limit), it returns the reservation whose
// Release frees the call's slots once the call ends.
func (in *Interceptor[K]) wait(ctx context.Context, fullMethod string) (*ratelimit.Reservation[K], error) {
	cost := in.cost(fullMethod)
	if cost == 0 {
		return nil, nil
	}
	key, ls, err := in.resolve(ctx, fullMethod)
	if err != nil {
		return nil, in.onError(ctx, fullMethod, err)
	}
	var d ratelimit.Decision
	var res *ratelimit.Reservation[K]
	switch {
	case ls.lim == nil && ls.policy == nil:
		return nil, nil // unlimited
	case in.fieldsOf(ls).Holds():
		res, d, err = holdSlot(ctx, ls, key, cost)
	default:
		d, err = ls.limiter().WaitN(ctx, key, cost)
	}
	return res, in.waited(ctx, fullMethod, ls, d, err)
}

// slotPoll bounds how long a client call waiting for a slot sleeps
// between tries.
const slotPoll = 50 * time.Millisecond

// holdSlot takes a slot of ls's in-flight limits (and a charge of the
// others) for a client call, and returns the reservation whose Release
// frees it. ReserveN decides a hold now, whatever its delay (no store
// knows when a slot frees), so a call that finds none tries again after
// the denial's RetryAfter (the oldest lease's end, an upper bound) or
// slotPoll, whichever is sooner: one store call per slotPoll per waiting
// call. A ctx that ends first ends the wait with
// ratelimit.ErrWouldExceedDeadline, as WaitN's does.
func holdSlot[K comparable](ctx context.Context, ls limits[K], key K, cost int) (*ratelimit.Reservation[K], ratelimit.Decision, error) {
	for {
		res, err := ls.limiter().ReserveN(ctx, key, cost, 0)
		if err != nil || res.OK() {
			return res, ratelimit.Decision{}, err
		}
		t := time.NewTimer(min(res.Decision().RetryAfter(), slotPoll))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, res.Decision(), fmt.Errorf("%w: %w", ratelimit.ErrWouldExceedDeadline, ctx.Err())
		}
	}
}

// waited is the error a client call that waited with d, or err, fails
// with, or nil.
func (in *Interceptor[K]) waited(ctx context.Context, fullMethod string, ls limits[K], d ratelimit.Decision, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ratelimit.ErrCostExceedsLimit):
		return status.Error(codes.ResourceExhausted, "the call costs more than the rate limit can ever admit")
	case errors.Is(err, ratelimit.ErrWouldExceedDeadline):
		return exhausted(d, in.fieldsOf(ls).Name(d.Binding()))
	}
	return in.onError(ctx, fullMethod, err)
}

// UnaryClient returns a client interceptor that waits, on the limiter's
// clock, until the limiter or policy admits a call before sending it. A
// call whose deadline would pass first fails at once with
// codes.ResourceExhausted and RetryInfo, without being sent. A KeyFunc or
// Resolver for the client side reads outgoing metadata, or keys by
// method.
func (in *Interceptor[K]) UnaryClient() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		res, err := in.wait(ctx, method)
		if err != nil {
			return err
		}
		if res != nil {
			defer res.Release(context.WithoutCancel(ctx))
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// StreamClient returns a client interceptor that waits, as UnaryClient
// does, before opening a stream. A slot of an in-flight limit is held
// until the stream ends: its RecvMsg returns an error (io.EOF at its end),
// or its context ends.
func (in *Interceptor[K]) StreamClient() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		res, err := in.wait(ctx, method)
		if err != nil {
			return nil, err
		}
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if res == nil {
			return cs, err
		}
		done := func() { _, _ = res.Release(context.WithoutCancel(ctx)) }
		if err != nil {
			done()
			return nil, err
		}
		stop := context.AfterFunc(ctx, done) // Release gives back once, whichever comes first
		return &heldStream{ClientStream: cs, done: func() { stop(); done() }}, nil
	}
}

// heldStream is a client stream holding a slot of an in-flight limit,
// released when RecvMsg reports the stream's end.
type heldStream struct {
	grpc.ClientStream
	done func()
}

func (s *heldStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.done()
	}
	return err
}

// exhausted is the error of a call denied by the limit named name:
// RESOURCE_EXHAUSTED with a RetryInfo detail carrying RetryAfter.
func exhausted(d ratelimit.Decision, name string) error {
	msg := fmt.Sprintf("rate limit %q exceeded; retry in %v", name, d.RetryAfter())
	st, err := status.New(codes.ResourceExhausted, msg).
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter())})
	if err != nil { // a RetryInfo always marshals
		return status.Error(codes.ResourceExhausted, msg)
	}
	return st.Err()
}

func defaultError(ctx context.Context, _ string, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	if st, ok := status.FromError(err); ok && st.Code() != codes.Unknown {
		return err
	}
	switch {
	case errors.Is(err, ErrNoKey):
		return status.Error(codes.InvalidArgument, "the call carries no rate-limit key")
	case errors.Is(err, ratelimit.ErrStoreUnavailable), errors.Is(err, ratelimit.ErrStoreFull):
		return status.Error(codes.Unavailable, "the rate limiter is unavailable; try again later")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The call's deadline passed before its context's timer ran.
		return status.FromContextError(err).Err()
	case errors.Is(err, ratelimit.ErrKeyTooLong):
		return status.Error(codes.InvalidArgument, "the call's rate-limit key is too long")
	case errors.Is(err, ratelimit.ErrTooManyStates):
		return status.Error(codes.ResourceExhausted, "the call's rate-limit key holds the most limits it may")
	case errors.Is(err, ratelimit.ErrStateMismatch):
		return status.Error(codes.Internal, "the rate limiter is misconfigured: a key's stored state is not its own")
	}
	return status.Error(codes.Internal, "the rate limiter failed")
}
