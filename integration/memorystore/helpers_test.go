package memorystore_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
	"github.com/go-ratelimit/ratelimit/slidinglog"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// t0 is an instant in Unix µs, on a whole second.
const t0 = int64(1_767_225_600_000_000)

var ctx = context.Background()

// allAlgorithms returns one algorithm of each kind the memory store keeps
// in its own table layout, each admitting 5 per second.
func allAlgorithms(t testing.TB) map[string]algorithm.Algorithm {
	t.Helper()
	algs := map[string]algorithm.Algorithm{}
	for name, newAlg := range map[string]func() (algorithm.Algorithm, error){
		"tokenbucket": func() (algorithm.Algorithm, error) {
			return tokenbucket.New(tokenbucket.Config{Capacity: 5, Rate: 5})
		},
		"tokenbucket-interval": func() (algorithm.Algorithm, error) {
			return tokenbucket.NewInterval(tokenbucket.IntervalConfig{Capacity: 5, Tokens: 5, Interval: time.Second})
		},
		"slidinglog": func() (algorithm.Algorithm, error) {
			return slidinglog.New(slidinglog.Config{Limit: 5, Window: time.Second})
		},
		"fixedwindow": func() (algorithm.Algorithm, error) {
			return fixedwindow.New(fixedwindow.Config{Limit: 5, Window: time.Second})
		},
	} {
		alg, err := newAlg()
		if err != nil {
			t.Fatal(err)
		}
		algs[name] = alg
	}
	return algs
}
