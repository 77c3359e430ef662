package slidinglog_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/slidinglog"
)

// BenchmarkTakeSteady admits one request per microsecond into a log whose
// window holds 1k, 8k or 32k entries: a decision should cost about the
// same whatever the log's length (O(log n)), and allocate nothing once the
// log is full.
//
//	go test -run='^$' -bench=TakeSteady -benchmem ./slidinglog
func BenchmarkTakeSteady(b *testing.B) {
	for _, window := range []time.Duration{time.Millisecond, 8 * time.Millisecond, 32 * time.Millisecond} {
		b.Run(fmt.Sprintf("window=%v", window), func(b *testing.B) {
			alg, err := slidinglog.New(slidinglog.Config{Limit: slidinglog.MaxLimit, Window: window})
			if err != nil {
				b.Fatal(err)
			}
			now := int64(1 << 50)
			s := alg.Init(algorithm.State{}, now)
			for range 2 * window.Microseconds() { // fill the window, then some
				now++
				s, _ = alg.Take(s, now, 1)
			}
			b.ReportAllocs()
			for b.Loop() {
				now++
				var r algorithm.Result
				if s, r = alg.Take(s, now, 1); !r.Allowed() {
					b.Fatal("denied")
				}
			}
		})
	}
}
