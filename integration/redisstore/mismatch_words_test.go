package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/internal/redistest"
	"github.com/go-ratelimit/ratelimit/store"
	"github.com/go-ratelimit/ratelimit/store/goredisstore"
	"github.com/go-ratelimit/ratelimit/store/rueidisstore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestMismatchNamesAlgorithmsInWords: a key whose state another algorithm
// wrote under the same state ID is refused, through both clients, with an
// error that puts the script's tags ("G100,36000000:", "T100:") in words
// (issue 43), the reader's from its algorithm.
func TestMismatchNamesAlgorithmsInWords(t *testing.T) {
	stores := map[string]func(t *testing.T, target redistest.Target) store.Store[string]{
		"goredis": func(t *testing.T, target redistest.Target) store.Store[string] {
			st, err := goredisstore.New(redistest.GoRedis(t, target), goredisstore.WithPrefix[string](redistest.Prefix(t)))
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"rueidis": func(t *testing.T, target redistest.Target) store.Store[string] {
			st, err := rueidisstore.New(redistest.Rueidis(t, target), rueidisstore.WithPrefix[string](redistest.Prefix(t)))
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
				st := open(t, target)
				writer, errW := ratelimit.New(meter, st, ratelimit.WithName("x"))
				reader, errR := ratelimit.New(bucket, st, ratelimit.WithName("x"))
				if errW != nil || errR != nil {
					t.Fatal(errW, errR)
				}
				if _, err := writer.Allow(context.Background(), "k"); err != nil {
					t.Fatal(err)
				}
				_, err := reader.Allow(context.Background(), "k")
				if !errors.Is(err, ratelimit.ErrStateMismatch) {
					t.Fatalf("reading a GCRA state with a token bucket: %v; want ErrStateMismatch", err)
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
