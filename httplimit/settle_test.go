package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// WithSettle charges a request what its response says it cost: an LLM
// proxy's token count, sent as a trailer once the stream has ended, on a
// tenant's bucket of 1,000 tokens a minute, each request admitted at an
// estimate of 100. A call that used 300 leaves 700; one of 1,600 leaves
// a debt that the next request waits out (601 tokens at 60 ms each).
func TestWithSettleTokens(t *testing.T) {
	fake := clock.NewFake(t0)
	bucket, err := tokenbucket.PerMinute(1000)
	if err != nil {
		t.Fatal(err)
	}
	lim := newLimiter[string](t, bucket, fake)
	proxy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Tokens-Used")
		w.Write([]byte("data: ...\n\n")) // the upstream's stream
		w.Header().Set("X-Tokens-Used", r.Header.Get("X-Will-Use"))
	})
	mw := httplimit.New(lim, byHeader,
		httplimit.WithCost(func(*http.Request) int { return 100 }),
		httplimit.WithSettle(func(_ *http.Request, status int, h http.Header, _ int64) int {
			n, err := strconv.Atoi(h.Get("X-Tokens-Used"))
			if status != http.StatusOK || err != nil {
				return -1 // keep the estimate
			}
			return n
		}))
	h := mw.Handler(proxy)
	call := func(use int) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		req.Header.Set("X-User", "tenant")
		req.Header.Set("X-Will-Use", strconv.Itoa(use))
		h.ServeHTTP(rec, req)
		return rec
	}
	left := func() int64 {
		d, err := lim.Peek(context.Background(), "tenant")
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining()
	}
	if rec := call(300); rec.Code != http.StatusOK || left() != 700 {
		t.Fatalf("a call that used 300: %d, %d left; want 200, 700 left", rec.Code, left())
	}
	if rec := call(1600); rec.Code != http.StatusOK {
		t.Fatalf("a call that used 1,600: %d", rec.Code)
	}
	rec := call(10)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("the call after a debt of 900: %d, want 429", rec.Code)
	}
	// 700 − 1,600 = −900 tokens; 100 fit after 1,000 of refill, 60 s.
	if got, want := rec.Header().Get("Retry-After"), strconv.Itoa(int((1000 * 60 * time.Millisecond).Seconds())); got != want {
		t.Errorf("Retry-After: %s, want %s", got, want)
	}
}

// WithSettle charges a download its bytes, at an estimate of 1 KiB to
// admit it; WithRefund, when it applies, refunds instead.
func TestWithSettleBytes(t *testing.T) {
	fake := clock.NewFake(t0)
	bucket, err := tokenbucket.New(tokenbucket.Config{Capacity: 1 << 20, Rate: 1})
	if err != nil {
		t.Fatal(err)
	}
	lim := newLimiter[string](t, bucket, fake)
	files := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(strings.Repeat("x", 300_000)))
	})
	mw := httplimit.New(lim, byHeader,
		httplimit.WithCost(func(*http.Request) int { return 1024 }),
		httplimit.WithRefund(func(status int) bool { return status == http.StatusNotFound }),
		httplimit.WithSettle(func(_ *http.Request, _ int, _ http.Header, written int64) int { return int(written) }))
	h := mw.Handler(files)
	for _, path := range []string{"/big", "/missing"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("X-User", "u")
		h.ServeHTTP(rec, req)
	}
	d, err := lim.Peek(context.Background(), "u")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(1<<20 - 300_000); d.Remaining() != want {
		t.Errorf("after a download of 300,000 bytes and a refunded 404: %d left, want %d", d.Remaining(), want)
	}
}
