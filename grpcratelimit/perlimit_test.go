package grpcratelimit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/grpcratelimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// A limit per tenant, read from a lookup, through Limiter.With; the
// fields follow each tenant's limit.
func TestLimiterResolverPerTenant(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	one, _ := tokenbucket.New(tokenbucket.Config{Capacity: 1, Rate: 1})
	base, err := ratelimit.New(one, memorystore.New[string](), ratelimit.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	plans := map[string]algorithm.Algorithm{}
	for tenant, n := range map[string]int64{"acme": 2, "initech": 3} {
		plans[tenant], _ = tokenbucket.New(tokenbucket.Config{Capacity: n, Rate: 1})
	}
	tenant := grpcratelimit.Metadata("x-tenant")
	in, err := grpcratelimit.NewLimiterResolver(func(ctx context.Context, method string) (string, *ratelimit.Limiter[string], error) {
		key, err := tenant(ctx, method)
		if err != nil {
			return "", nil, err
		}
		lim, err := base.With(plans[key])
		return key, lim, err
	})
	if err != nil {
		t.Fatal(err)
	}
	c := serveBufconn(t, in)
	for name, n := range map[string]int{"acme": 2, "initech": 3} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", name)
		for i := range n {
			md, err := checkMD(ctx, c)
			if err != nil {
				t.Fatalf("%s call %d: %v", name, i+1, err)
			}
			if got, want := md.Get("ratelimit-policy"), map[string]string{"acme": `"default";q=2;w=2`, "initech": `"default";q=3;w=3`}[name]; len(got) != 1 || got[0] != want {
				t.Errorf("%s: ratelimit-policy %v, want %q", name, got, want)
			}
		}
		wantExhausted(t, check(ctx, c), time.Second)
	}
	if _, err := grpcratelimit.NewLimiterResolver[string](nil); err == nil {
		t.Error("a nil resolver was accepted")
	}
	wantCode(t, check(context.Background(), c), codes.InvalidArgument) // no tenant: ErrNoKey
}
