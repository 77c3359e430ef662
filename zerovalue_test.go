package ratelimit_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// TestZeroValueAlgorithms: an algorithm's zero value admits nothing (its
// Limit is 0), so every call would fail with "cost exceeds the limit":
// New, NewPolicy, SetAlgorithm, SetLimit and With refuse it with
// ErrInvalidConfig instead.
func TestZeroValueAlgorithms(t *testing.T) {
	good, err := tokenbucket.PerSecond(10)
	if err != nil {
		t.Fatal(err)
	}
	for _, zero := range []algorithm.Algorithm{&tokenbucket.Bucket{}, &tokenbucket.IntervalBucket{}, &gcra.Meter{},
		&slidinglog.Log{}, &slidingwindow.Window{}, &fixedwindow.Window{}} {
		t.Run(fmt.Sprintf("%T", zero), func(t *testing.T) {
			st := memorystore.New[string]()
			if _, err := ratelimit.New(zero, st); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("New: %v, want ErrInvalidConfig", err)
			}
			if _, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Algorithm: good}, {Algorithm: zero}}); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("NewPolicy: %v, want ErrInvalidConfig", err)
			}
			lim, err := ratelimit.New(good, st, ratelimit.WithResetOnMismatch())
			if err != nil {
				t.Fatal(err)
			}
			if err := lim.SetAlgorithm(zero); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("SetAlgorithm: %v, want ErrInvalidConfig", err)
			}
			if _, err := lim.With(zero); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("With: %v, want ErrInvalidConfig", err)
			}
			p, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Algorithm: good, ResetOnMismatch: true}})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.SetLimit(0, zero); !errors.Is(err, ratelimit.ErrInvalidConfig) {
				t.Errorf("SetLimit: %v, want ErrInvalidConfig", err)
			}
		})
	}
}
