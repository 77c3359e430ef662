package ratelimit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func TestInheritanceOptions(t *testing.T) {
	log, err := slidinglog.Per(10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := tokenbucket.PerMinute(10)
	if err != nil {
		t.Fatal(err)
	}
	st := memorystore.New[string]()
	if _, err := ratelimit.New(log, st, ratelimit.WithInheritance(algorithm.Proportional)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("a proportional sliding log: %v, want ErrInvalidConfig", err)
	}
	if _, err := ratelimit.New(bucket, st, ratelimit.WithInheritance(algorithm.Proportional), ratelimit.WithResetOnMismatch()); err != nil {
		t.Errorf("a proportional bucket: %v", err)
	}
	if _, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Algorithm: bucket}}, ratelimit.WithInheritance(algorithm.AsIs)); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("WithInheritance on a policy: %v, want ErrInvalidConfig", err)
	}
	if _, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Algorithm: log, Inherit: algorithm.Proportional}}); !errors.Is(err, ratelimit.ErrInvalidConfig) {
		t.Errorf("a proportional sliding log in a policy: %v, want ErrInvalidConfig", err)
	}
	if _, err := ratelimit.NewPolicy(st, []ratelimit.Limit{{Algorithm: bucket, Inherit: algorithm.Proportional, ResetOnMismatch: true}}); err != nil {
		t.Errorf("a proportional bucket in a policy: %v", err)
	}
}
