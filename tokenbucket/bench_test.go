package tokenbucket_test

import (
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/tokenbucket"
)

// BenchmarkTake times one admitted decision of a bucket far below its
// limit (a burst of 1e9, 1e9 per hour) and one denied decision, the
// transition alone:
//
//	go test -run='^$' -bench=Take ./tokenbucket
func BenchmarkTake(b *testing.B) {
	for _, c := range []struct {
		name string
		cfg  tokenbucket.Config
		ok   bool
	}{
		{"generous", tokenbucket.Config{Capacity: 1_000_000_000, Rate: 1e9 / 3600}, true},
		{"denied", tokenbucket.Config{Capacity: 1, Rate: 1e-4}, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			alg, err := tokenbucket.New(c.cfg)
			if err != nil {
				b.Fatal(err)
			}
			now := int64(1_700_000_000_000_000)
			s, _ := alg.Take(alg.Init(algorithm.State{}, now), now, 1)
			for b.Loop() {
				now++
				var r algorithm.Result
				if s, r = alg.Take(s, now, 1); r.Allowed() != c.ok {
					b.Fatal("unexpected decision")
				}
			}
		})
	}
}
