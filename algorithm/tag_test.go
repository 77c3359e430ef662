package algorithm_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/slidingwindow"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The headers of design §1.3, for the configurations the table names.
func TestTagHeaders(t *testing.T) {
	for _, tc := range []struct {
		alg  algorithm.Algorithm
		want string
	}{
		{must(tokenbucket.New(tokenbucket.Config{Capacity: 100, Rate: 5})), "T100:"},
		{must(tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 100, Tokens: 10, Interval: time.Second})), "I100:"},
		{must(gcra.New(gcra.Config{Burst: 10, Every: 600 * time.Millisecond})), "G10,600000:"},
		{must(fixedwindow.PerMinute(100)), "F100,60000000:"},
		{must(slidingwindow.PerMinute(100)), "S100,60000000:"},
		{must(slidinglog.Per(100, time.Hour)), "L3600000000:"},
	} {
		tag, ok := algorithm.TagOf(tc.alg)
		if !ok {
			t.Fatalf("%v is not Tagged", tc.alg)
		}
		if got := tag.Header(); got != tc.want {
			t.Errorf("%v: header %q, want %q", tc.alg, got, tc.want)
		}
		if got, want := tag.String(), strings.TrimSuffix(tc.want, ":"); got != want {
			t.Errorf("%v: String %q, want %q", tc.alg, got, want)
		}
	}
}

// Equal Tags for configurations whose states mean the same; a rate is not
// part of a bucket's.
func TestTagIgnoresRate(t *testing.T) {
	a := must(tokenbucket.New(tokenbucket.Config{Capacity: 100, Rate: 5})).Tag()
	b := must(tokenbucket.New(tokenbucket.Config{Capacity: 100, Rate: 500})).Tag()
	c := must(tokenbucket.New(tokenbucket.Config{Capacity: 101, Rate: 5})).Tag()
	if a != b || a == c {
		t.Fatalf("tags %v %v %v: want the first two equal, the third different", a, b, c)
	}
}

func TestHeadersArePrefixFree(t *testing.T) {
	tags := []algorithm.Tag{
		{Kind: 'T', P0: 1}, {Kind: 'T', P0: 10}, {Kind: 'T', P0: 100},
		{Kind: 'G', P0: 1, P1: 1}, {Kind: 'G', P0: 1, P1: 10}, {Kind: 'G', P0: 11, P1: 1},
		{Kind: 'F', P0: 1, P1: 23}, {Kind: 'F', P0: 12, P1: 3}, {Kind: 'S', P0: 12, P1: 3},
		{Kind: 'L', P0: 1}, {Kind: 'I', P0: 1},
	}
	for i, a := range tags {
		for j, b := range tags {
			if i != j && strings.HasPrefix(b.Header(), a.Header()) {
				t.Errorf("header %q is a prefix of %q", a.Header(), b.Header())
			}
		}
	}
	if h := (algorithm.Tag{Kind: 'x', P0: 1}).Header(); h != "" {
		t.Errorf("unknown kind's header %q, want none", h)
	}
}

func TestCheckRule(t *testing.T) {
	log := must(slidinglog.PerMinute(10))
	bucket := must(tokenbucket.PerMinute(10))
	for _, tc := range []struct {
		alg  algorithm.Algorithm
		rule algorithm.Rule
		ok   bool
	}{
		{bucket, algorithm.AsIs, true},
		{bucket, algorithm.Proportional, true},
		{log, algorithm.AsIs, true},
		{log, algorithm.Proportional, false},
		{bucket, algorithm.Rule(7), false},
	} {
		err := algorithm.CheckRule(tc.alg, tc.rule)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, algorithm.ErrInvalidConfig)) {
			t.Errorf("CheckRule(%v, %v) = %v, want ok %v", tc.alg, tc.rule, err, tc.ok)
		}
	}
}
