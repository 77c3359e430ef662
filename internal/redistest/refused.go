package redistest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
)

// testRefused stops the server under a store that has decided once, so
// that nothing listens at its address any more, then decides with
// contexts of every kind: one that cannot end, deadlines shorter and
// longer than the store's timeout (3 s), and one cancelled by hand. Each
// must fail with ErrStoreUnavailable and say that the connection was
// refused (or closed), whatever the caller's deadline: a client that retries a
// refused dial for longer than the caller waits (go-redis) must not make
// it look as if the caller's context had ended while Redis decided.
func testRefused(t *testing.T, newStore NewStore) {
	t.Parallel()
	target := Miniredis(t)
	alg, err := bucketPer(10, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lim := newLimiter(t, alg, newStore(t, target, Prefix(t)), ratelimit.WithName("refused"))
	if d, err := lim.Allow(t.Context(), "k"); err != nil || !d.Allowed() {
		t.Fatalf("Allow while the server is up = %+v, %v", d, err)
	}
	target.Mini.Close()
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"deadline 100ms", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 100*time.Millisecond)
		}},
		{"deadline 1s", func() (context.Context, context.CancelFunc) { return context.WithTimeout(t.Context(), time.Second) }},
		{"deadline 10s", func() (context.Context, context.CancelFunc) { return context.WithTimeout(t.Context(), 10*time.Second) }},
		{"cancellable", func() (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) }},
		{"background", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
	} {
		ctx, cancel := c.ctx()
		d, err := lim.Allow(ctx, "k")
		cancel()
		// rueidis keeps several connections, each of which a call may
		// find closed by the server's going (EOF) before its dial is
		// refused; go-redis checks a connection before it sends.
		if !errors.Is(err, ratelimit.ErrStoreUnavailable) || !strings.Contains(err.Error(), "refused") && !strings.Contains(err.Error(), "EOF") {
			t.Errorf("Allow with a context %s, nothing listening at the server's address = %+v, %v; want ErrStoreUnavailable, saying the connection was refused (or closed)", c.name, d, err)
		}
	}
}
