package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/concurrency"
	"github.com/go-ratelimit/ratelimit/httplimit"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestHoldsASlotPerRequest: with an in-flight limit of 2, two requests in
// their handlers fill it, a third is answered 429, and each slot is free
// again once its handler returns, or panics.
func TestHoldsASlotPerRequest(t *testing.T) {
	ctx := context.Background()
	slots := must(concurrency.New(concurrency.Config{Limit: 2, Lease: time.Minute}))
	lim, err := ratelimit.New(slots, memorystore.New[string](), ratelimit.WithName("inflight"))
	if err != nil {
		t.Fatal(err)
	}
	in, out := make(chan struct{}), make(chan struct{})
	h := httplimit.New(lim, func(*http.Request) (string, error) { return "k", nil }).
		Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/panic" {
				panic(http.ErrAbortHandler)
			}
			in <- struct{}{}
			<-out
		}))
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- code(h, "/")
		}()
	}
	<-in
	<-in
	if c := code(h, "/"); c != http.StatusTooManyRequests {
		t.Errorf("a third request while two are held: %d, want 429", c)
	}
	if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 0 {
		t.Errorf("two requests in their handlers: %v, want 0 left", d)
	}
	close(out)
	wg.Wait()
	for range 2 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("a held request: %d", c)
		}
	}
	if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 2 {
		t.Errorf("after both handlers returned: %v, want 2 left", d)
	}
	func() {
		defer func() { _ = recover() }()
		code(h, "/panic")
	}()
	if d, _ := lim.Peek(ctx, "k"); d.Remaining() != 2 {
		t.Errorf("after a handler panicked: %v, want its slot back (2 left)", d)
	}
}

// TestPolicyKeepsTheTokenFreesTheSlot: behind a policy of a rate and an
// in-flight limit, a finished request keeps its token and frees its slot.
func TestPolicyKeepsTheTokenFreesTheSlot(t *testing.T) {
	ctx := context.Background()
	p, err := ratelimit.NewPolicy(memorystore.New[string](), []ratelimit.Limit{
		{Name: "rate", Algorithm: must(tokenbucket.PerMinute(10))},
		{Name: "inflight", Algorithm: must(concurrency.New(concurrency.Config{Limit: 1, Lease: time.Minute}))},
	}, ratelimit.WithName("api"))
	if err != nil {
		t.Fatal(err)
	}
	h := httplimit.NewPolicy(p, func(*http.Request) (string, error) { return "k", nil }).
		Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for i := range 3 {
		if c := code(h, "/"); c != http.StatusOK {
			t.Fatalf("request %d, one at a time: %d", i, c)
		}
	}
	d, err := p.Peek(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if rate, slots := d.Limits()[0].Remaining(), d.Limits()[1].Remaining(); rate != 7 || slots != 1 {
		t.Errorf("after 3 requests: rate %d, slots %d left; want 7 and 1", rate, slots)
	}
}

// code serves a GET of path on h and returns the status.
func code(h http.Handler, path string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code
}

// TestWithWaitForASlot: under WithWait, a request that finds the only slot
// held waits (ReserveN decides a hold now, so it tries again) and runs
// once the holder's handler has returned, never while it runs.
func TestWithWaitForASlot(t *testing.T) {
	slots := must(concurrency.New(concurrency.Config{Limit: 1, Lease: time.Hour}))
	lim, err := ratelimit.New(slots, memorystore.New[string](), ratelimit.WithName("inflight"))
	if err != nil {
		t.Fatal(err)
	}
	in, out := make(chan struct{}), make(chan struct{})
	var running sync.Mutex
	h := httplimit.New(lim, func(*http.Request) (string, error) { return "k", nil }, httplimit.WithWait(10*time.Second, 0)).
		Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !running.TryLock() {
				t.Error("two requests in their handlers with one slot")
				return
			}
			defer running.Unlock()
			if r.URL.Path == "/first" {
				in <- struct{}{}
				<-out
			}
		}))
	first := make(chan int, 1)
	go func() { first <- code(h, "/first") }()
	<-in
	second := make(chan int, 1)
	go func() { second <- code(h, "/second") }()
	time.Sleep(60 * time.Millisecond) // the second request tries, finds no slot, waits
	close(out)
	if c := <-first; c != http.StatusOK {
		t.Errorf("the first request: %d", c)
	}
	if c := <-second; c != http.StatusOK {
		t.Errorf("the second request, which waited for the slot: %d, want 200", c)
	}
}
