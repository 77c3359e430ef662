package slidinglog

import (
	"fmt"
	"time"
)

// Describe returns the log in words, for errors: "a sliding log of 100
// per 1m0s".
func (l *Log) Describe() string {
	return fmt.Sprintf("a sliding log of %d per %v", l.limit, time.Duration(l.window)*time.Microsecond)
}
