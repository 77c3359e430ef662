package fixedwindow_test

import (
	"testing"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
	"github.com/go-ratelimit/ratelimit/fixedwindow"
)

// BenchmarkTake times Take and Peek on one key, its clock moving 1ms a
// call through windows of a second, at a limit it never reaches.
func BenchmarkTake(b *testing.B) {
	w, err := fixedwindow.New(fixedwindow.Config{Limit: 1 << 30, Window: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("take", func(b *testing.B) {
		b.ReportAllocs()
		s, now := w.Init(algorithm.State{}, t0), int64(t0)
		for b.Loop() {
			s, _ = w.Take(s, now, 1)
			now += 1000
		}
	})
	b.Run("peek", func(b *testing.B) {
		b.ReportAllocs()
		s, now := w.Init(algorithm.State{}, t0), int64(t0)
		s, _ = w.Take(s, now, 1)
		var r algorithm.Result
		for b.Loop() {
			r = w.Peek(s, now, 2)
			now += 1000
		}
		_ = r
	})
}
