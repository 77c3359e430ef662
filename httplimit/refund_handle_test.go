package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/clock"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// TestWithRefundGivesBackItsOwnAdmission: WithRefund gives back the
// refunded request's own admission, never another's charge. Request A is
// admitted, its handler runs while the key is charged by others, and it
// answers 500 (refunded); then the key must still count every other
// admission: a refund of "the newest charge" would free the slot of a
// booking another caller holds (the job runner of issue 41), or give back
// room in a window A was not counted in (a late refund).
func TestWithRefundGivesBackItsOwnAdmission(t *testing.T) {
	for _, tc := range []struct {
		name string
		alg  algorithm.Algorithm
		// meanwhile charges the key while A's handler runs, on lim.
		meanwhile func(t *testing.T, h http.Handler, lim *ratelimit.Limiter[string], fake *clock.Fake)
	}{
		{
			// 2 a second: A and B now, C booked by another caller for 1s.
			// At 1s, D fits beside C and E must not.
			name: "booking ahead",
			alg:  must(slidinglog.PerSecond(2)),
			meanwhile: func(t *testing.T, h http.Handler, lim *ratelimit.Limiter[string], fake *clock.Fake) {
				if c := get(h, false); c != http.StatusOK {
					t.Fatalf("B: %d", c)
				}
				r, err := lim.Reserve(context.Background(), "k")
				if err != nil || !r.OK() || r.Delay() != time.Second {
					t.Fatalf("C's booking: %v, %v; want due in 1s", r, err)
				}
			},
		},
		{
			// 2 a minute: A in the first window; B and C spend the next
			// one before A's late refund.
			name: "late refund",
			alg:  must(fixedwindow.PerMinute(2)),
			meanwhile: func(t *testing.T, h http.Handler, lim *ratelimit.Limiter[string], fake *clock.Fake) {
				fake.Advance(time.Minute)
				for _, name := range []string{"B", "C"} {
					if c := get(h, false); c != http.StatusOK {
						t.Fatalf("%s: %d", name, c)
					}
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			lim := must(ratelimit.New(tc.alg, memorystore.New[string](), ratelimit.WithClock(fake)))
			release := make(chan struct{})
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Block") != "" {
					<-release
					w.WriteHeader(http.StatusInternalServerError) // refunded
					return
				}
				w.Write([]byte("ok"))
			})
			h := httplimit.New(lim, func(*http.Request) (string, error) { return "k", nil },
				httplimit.WithRefund(func(status int) bool { return status >= 500 })).Handler(next)
			a := make(chan int)
			go func() { a <- get(h, true) }()
			waitCharged(t, lim)
			tc.meanwhile(t, h, lim, fake)
			close(release)
			if c := <-a; c != http.StatusInternalServerError {
				t.Fatalf("A: %d", c)
			}
			fake.Advance(time.Second)
			if tc.name == "booking ahead" {
				if c := get(h, false); c != http.StatusOK {
					t.Fatalf("D at 1s beside C: %d, want 200", c)
				}
			}
			if c := get(h, false); c != http.StatusTooManyRequests {
				t.Fatalf("last request: %d, want 429: A's refund gave back another admission's room", c)
			}
		})
	}
}

// get serves one request for key "k" on h, blocked in the handler when
// block is set, and returns its status.
func get(h http.Handler, block bool) int {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if block {
		r.Header.Set("X-Block", "1")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code
}

// waitCharged waits until key "k" of lim has been charged once (A's
// admission, made in another goroutine).
func waitCharged(t *testing.T, lim *ratelimit.Limiter[string]) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := lim.Peek(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if d.Remaining() < 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("A was never admitted")
		}
		time.Sleep(time.Millisecond)
	}
}
