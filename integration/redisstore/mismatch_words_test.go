package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/luascript"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestMismatchNamesAlgorithmsInWords: a key whose state another algorithm
// wrote under the same state ID is carried (what it had used, issue 48),
// and one no algorithm reads (a GCRA header over a body GCRA cannot read)
// is refused, through both clients, with an error that puts the script's
// tags ("G100,36000000:", "T100:") in words (issue 43), the reader's from
// its algorithm.
func TestMismatchNamesAlgorithmsInWords(t *testing.T) {
	stores := map[string]func(t *testing.T, target redistest.Target, prefix string) store.Store[string]{
		"goredis": func(t *testing.T, target redistest.Target, prefix string) store.Store[string] {
			st, err := goredisstore.New(redistest.GoRedis(t, target), goredisstore.WithPrefix[string](prefix))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"rueidis": func(t *testing.T, target redistest.Target, prefix string) store.Store[string] {
			st, err := rueidisstore.New(redistest.Rueidis(t, target), rueidisstore.WithPrefix[string](prefix))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	meter, err := gcra.Per(100, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := tokenbucket.PerSecond(100)
	if err != nil {
		t.Fatal(err)
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			redistest.Each(t, func(t *testing.T, target redistest.Target) {
				prefix := redistest.Prefix(t)
				st := open(t, target, prefix)
				writer, errW := ratelimit.New(meter, st, ratelimit.WithName("x"))
				reader, errR := ratelimit.New(bucket, st, ratelimit.WithName("x"))
				if errW != nil || errR != nil {
					t.Fatal(errW, errR)
				}
				ctx := context.Background()
				if _, err := writer.AllowN(ctx, "k", 3); err != nil {
					t.Fatal(err)
				}
				if d, err := reader.Peek(ctx, "k"); err != nil || d.Remaining() > 97 {
					t.Fatalf("reading a GCRA state with a token bucket: %v, %v; want the 3 it had used carried", d, err)
				}
				hash := luascript.Keys(prefix+"{k}", "x")[0]
				if err := redistest.GoRedis(t, target).HSet(ctx, hash, "x", "G100,36000000:junk").Err(); err != nil {
					t.Fatal(err)
				}
				_, err := reader.Allow(ctx, "k")
				if !errors.Is(err, ratelimit.ErrStateMismatch) {
					t.Fatalf("reading a GCRA header over junk with a token bucket: %v; want ErrStateMismatch", err)
				}
				for _, want := range []string{`state ID "x" holds the state of GCRA, burst 100, one every 36s`, "this limit, a token bucket of 100 refilled in 1s, cannot read"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
			})
		})
	}
}
