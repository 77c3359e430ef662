package tokenbucket

import (
	"fmt"
	"time"
)

// Describe returns the bucket in words, for errors: "a token bucket of
// 100 refilled in 1s" (Window, the time an empty bucket takes to refill).
func (b *Bucket) Describe() string {
	return fmt.Sprintf("a token bucket of %d refilled in %v", b.limit, b.Window())
}

// Describe returns the bucket in words, for errors: "a token bucket of
// 100, +10 every 1s".
func (b *IntervalBucket) Describe() string {
	return fmt.Sprintf("a token bucket of %d, +%d every %v", b.capacity, b.tokens,
		time.Duration(b.interval)*time.Microsecond)
}
