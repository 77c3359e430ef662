package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/store"
)

// opDone is a booking operation's outcome, as its caller got it.
type opDone struct {
	r       algorithm.Result
	booking store.Booking
	booked  bool
	err     error
}

func book(ctx context.Context, tab *Table[string], key string, now, cost int64) chan opDone {
	out := make(chan opDone, 1)
	go func() {
		r, b, ok, err := tab.Book(ctx, key, now, cost, 1_000_000, nil)
		out <- opDone{r, b, ok, err}
	}()
	return out
}

func refund(ctx context.Context, tab *Table[string], key string, now, n int64) chan opDone {
	out := make(chan opDone, 1)
	go func() {
		r, err := tab.Refund(ctx, key, now, n, nil)
		out <- opDone{r: r, err: err}
	}()
	return out
}

func cancelBooking(ctx context.Context, tab *Table[string], key string, now int64, b store.Booking) chan opDone {
	out := make(chan opDone, 1)
	go func() {
		out <- opDone{err: tab.Cancel(ctx, key, now, b)}
	}()
	return out
}

// bookReply is a book script's reply to a request at now: booked at now +
// 10, with 1000 - now remaining, the values before and after, and the
// state's generation.
func bookReply(now string) []string {
	n, _ := strconv.ParseInt(now, 10, 64)
	return []string{"1", strconv.FormatInt(n+10, 10), strconv.FormatInt(1000-n, 10), "10", "0", "pre" + now, "post" + now, ";g" + now}
}

// TestCoalesceOpsInOrder: bookings, refunds and cancels of a key wait in
// its line as Takes do, behind its calls in flight; a batch is the first
// request waiting and those of its kind behind it, in arrival order. Here
// a booking, a Take, a booking, a refund, a Take and a cancel wait: the
// two bookings go in one book batch, then the two Takes in one batch, then
// the refund and the cancel alone, each with its own reply.
func TestCoalesceOpsInOrder(t *testing.T) {
	tab, run := coalescingTable(t)
	ctx := t.Context()
	alone, first := busy(t, tab, run, "k")
	b1 := book(ctx, tab, "k", 100, 2)
	waitQueued(t, tab, "k", 1)
	t1 := take(ctx, tab, "k", 101)
	waitQueued(t, tab, "k", 2)
	b2 := book(ctx, tab, "k", 102, 3)
	waitQueued(t, tab, "k", 3)
	rf := refund(ctx, tab, "k", 103, 4)
	waitQueued(t, tab, "k", 4)
	t2 := take(ctx, tab, "k", 104)
	waitQueued(t, tab, "k", 5)
	// A booking made before, by this table, to cancel.
	undo := store.Booking{Act: 500, Cost: 5, Undo: bookingUndo{table: tab, values: []string{"a", "b", ";g"}}}
	cn := cancelBooking(ctx, tab, "k", 105, undo)
	waitQueued(t, tab, "k", 6)

	// One call in flight returns: the two bookings go together.
	answer(t, alone[:1], first[:1])
	c := next(t, run)
	if c.script != runScript(tab.opBatch[luascript.OpBook]) {
		t.Fatalf("the waiting bookings ran %s, want the book batch script", c.script.Name)
	}
	// n, m, then each request's now, cost, maxDelay and nonce (random,
	// one per booking), then the table's.
	if got := fmt.Sprint(c.argv[:5], c.argv[6:9]); got != "[2 4 100 2 1000000] [102 3 1000000]" || c.argv[5] == "" || c.argv[5] == c.argv[9] {
		t.Fatalf("book batch arguments %v", c.argv[:10])
	}
	c.answer <- evalAnswer{strs: append(bookReply("100"), bookReply("102")...)}
	for i, ch := range []chan opDone{b1, b2} {
		o := result(t, ch)
		now := int64(100 + 2*i)
		want := bookingUndo{table: tab, values: []string{fmt.Sprint("pre", now), fmt.Sprint("post", now), fmt.Sprint(";g", now)}}
		if o.err != nil || !o.booked || o.booking.Act != now+10 || o.booking.Cost != int64(2+i) || o.r.Remaining != 1000-now ||
			fmt.Sprint(o.booking.Undo) != fmt.Sprint(want) {
			t.Fatalf("booking %d: %+v, want its own reply", i, o)
		}
	}

	// The goroutine that sent it sends the next batch: the two Takes. (The
	// other calls in flight stay unanswered, so that one goroutine sends
	// every batch, in turn.)
	c = next(t, run)
	if nows, _ := c.requests(t); c.script != runScript(tab.batch) || fmt.Sprint(nows) != "[101 104]" {
		t.Fatalf("the waiting Takes ran %s at %v, want the batch script at [101 104]", c.script.Name, nows)
	}
	c.answer <- evalAnswer{reply: c.replyFor(t)}
	for i, ch := range []chan taken{t1, t2} {
		if o := result(t, ch); o.err != nil || o.r.Remaining != int64(1000-101-3*i) {
			t.Fatalf("Take %d: %+v", i, o)
		}
	}

	c = next(t, run)
	if c.script != runScript(tab.ops[luascript.OpRefund]) || c.argv[0] != "103" || c.argv[1] != "4" {
		t.Fatalf("the waiting refund ran %s with %v, want the refund script with its now and count", c.script.Name, c.argv)
	}
	c.answer <- evalAnswer{reply: []int64{7, 0, 0}}
	if o := result(t, rf); o.err != nil || o.r.Remaining != 7 {
		t.Fatalf("refund: %+v", o)
	}

	c = next(t, run)
	if c.script != runScript(tab.ops[luascript.OpCancel]) || fmt.Sprint(c.argv[len(c.argv)-4:]) != "[500 a b ;g]" {
		t.Fatalf("the waiting cancel ran %s with %v, want the cancel script with the booking's instant and values", c.script.Name, c.argv)
	}
	c.answer <- evalAnswer{reply: []int64{5}}
	if o := result(t, cn); o.err != nil {
		t.Fatalf("cancel: %v", o.err)
	}
	answer(t, alone[1:], first[1:])
	waitForgotten(t, tab)
}

// TestCoalesceOpsFailure: a booking batch shares the single call's
// failure semantics: a lost reply reaches every request as
// store.ErrUnavailable (nothing resent), and a reply that stops early (a
// state the script cannot read) gives the requests after it
// store.ErrStateMismatch.
func TestCoalesceOpsFailure(t *testing.T) {
	tab, run := coalescingTable(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name  string
		ans   evalAnswer
		first error
	}{
		{"lost", evalAnswer{err: errors.New("connection reset")}, store.ErrUnavailable},
		{"stopped", evalAnswer{reply: []int64{9, 0, 0}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alone, first := busy(t, tab, run, "k")
			r1 := refund(ctx, tab, "k", 100, 1)
			waitQueued(t, tab, "k", 1)
			r2 := refund(ctx, tab, "k", 101, 1)
			waitQueued(t, tab, "k", 2)
			answer(t, alone[:1], first[:1])
			c := next(t, run)
			if c.script != runScript(tab.opBatch[luascript.OpRefund]) {
				t.Fatalf("ran %s, want the refund batch script", c.script.Name)
			}
			c.answer <- tc.ans
			o1, o2 := result(t, r1), result(t, r2)
			if tc.first != nil {
				if !errors.Is(o1.err, tc.first) || !errors.Is(o2.err, tc.first) {
					t.Fatalf("refunds: %v, %v; want both %v", o1.err, o2.err, tc.first)
				}
			} else if o1.err != nil || o1.r.Remaining != 9 || !errors.Is(o2.err, store.ErrStateMismatch) {
				t.Fatalf("refunds: %+v, %v; want the first's reply and store.ErrStateMismatch", o1, o2.err)
			}
			select {
			case c := <-run.calls:
				t.Fatalf("a call was resent: %s", c.script.Name)
			default:
			}
			answer(t, alone[1:], first[1:])
			waitForgotten(t, tab)
		})
	}
}

// TestCoalesceOpsDeadlines: a booking batch's call is bounded by the
// table's own Timeout, not by its requests' deadlines, and a booking whose
// short deadline ends while its batch is in flight returns at once,
// unknown, without ending the call for the others.
func TestCoalesceOpsDeadlines(t *testing.T) {
	tab, run := coalescingTable(t)
	alone, first := busy(t, tab, run, "k")
	short, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	hurried := book(short, tab, "k", 100, 1)
	waitQueued(t, tab, "k", 1)
	patient := book(t.Context(), tab, "k", 101, 1)
	waitQueued(t, tab, "k", 2)
	sent := time.Now()
	answer(t, alone[:1], first[:1])
	c := next(t, run)
	if c.script != runScript(tab.opBatch[luascript.OpBook]) {
		t.Fatalf("ran %s, want the book batch script", c.script.Name)
	}
	checkOwnBound(t, tab, c.ctx, sent)
	if o := result(t, hurried); !errors.Is(o.err, store.ErrUnavailable) || !errors.Is(o.err, context.DeadlineExceeded) {
		t.Fatalf("the booking with the short deadline: %v", o.err)
	}
	if err := c.ctx.Err(); err != nil {
		t.Fatalf("the batch's call ended with the short deadline: %v", err)
	}
	c.answer <- evalAnswer{strs: append(bookReply("100"), bookReply("101")...)}
	if o := result(t, patient); o.err != nil || !o.booked || o.booking.Act != 111 {
		t.Fatalf("the booking with no deadline: %+v", o)
	}
	answer(t, alone[1:], first[1:])
	waitForgotten(t, tab)
}
