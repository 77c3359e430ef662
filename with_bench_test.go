package ratelimit_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit"
	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/gcra"
	"github.com/go-ratelimit/ratelimit/store/memorystore"
)

// BenchmarkWith compares a decision with a limit given per call
// (Limiter.With of a kept algorithm, then AllowN) with the same limit's
// Limiter deciding alone, on the memory store, over 10,000 keys each on
// one of 100 limits:
//
//	go test -run='^$' -bench=With -benchmem .
func BenchmarkWith(b *testing.B) {
	ctx := context.Background()
	const keys, plans = 10_000, 100
	algs := make([]algorithm.Algorithm, plans)
	for i := range algs {
		var err error
		if algs[i], err = gcra.New(gcra.Config{Burst: 1 << 30, Every: time.Duration(i+1) * time.Microsecond}); err != nil {
			b.Fatal(err)
		}
	}
	names := make([]string, keys)
	for i := range names {
		names[i] = "customer:" + strconv.Itoa(i)
	}
	base, err := ratelimit.New[string](algs[0], memorystore.New[string]())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("AllowN", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := base.AllowN(ctx, names[i%keys], 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("With+AllowN", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			lim, err := base.With(algs[i%plans])
			if err != nil {
				b.Fatal(err)
			}
			if _, err := lim.AllowN(ctx, names[i%keys], 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
