package tokenbucket

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

// TestFullGuessIsClose checks that Take's first guess at ResetAfter is
// within a few µs of the exact answer, over buckets from one token to
// algorithm.MaxLimit and states from empty to full, long idle or just
// charged, with the clock before or after the state's instant. The answer
// is exact whatever the guess (untilFrom checks it), so a guess far off
// would show only as a decision that loops: this is that test.
func TestFullGuessIsClose(t *testing.T) {
	const within = 3 // µs
	rng := rand.New(rand.NewPCG(1, 2))
	worst, checked := 0.0, 0
	for range 200_000 {
		capacity := int64(1) + rng.Int64N(algorithm.MaxLimit)
		if rng.IntN(2) == 0 {
			capacity = 1 + rng.Int64N(1000)
		}
		// A fill time from 1µs to algorithm.MaxDuration, spread over the
		// orders of magnitude.
		fill := math.Exp2(rng.Float64() * math.Log2(float64(algorithm.MaxDuration)))
		b, err := New(Config{Capacity: capacity, Rate: float64(capacity) * 1e6 / fill})
		if err != nil {
			continue // a rounding pushed the fill time over the limit
		}
		tokens := b.capacity * rng.Float64()
		last := int64(1) << 50
		now := last + rng.Int64N(4*int64(fill)+2) - rng.Int64N(3)
		held := b.at(tokens, last, now)
		c := float64(1 + rng.Int64N(capacity))
		if c > held {
			continue // denied: Take does not guess
		}
		checked++
		guess := b.fullGuess(tokens, last, c, now)
		left, from := held-c, max(last, now)
		exact := b.untilFrom(guess, left, from, b.capacity, now) - (from - now)
		if d := math.Abs(guess - float64(exact)); d > worst {
			worst = d
			if d > within {
				t.Fatalf("capacity %d, rate %v/s, tokens %v, %dµs since last, cost %v: guessed %vµs, exact %dµs",
					capacity, b.rate, tokens, now-last, c, guess, exact)
			}
		}
	}
	t.Logf("%d admitted charges, worst guess %vµs off", checked, worst)
}
