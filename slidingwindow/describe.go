package slidingwindow

import (
	"fmt"
	"time"
)

// Describe returns the counter in words, for errors: "a sliding-window
// counter of 100 per 1m0s".
func (w *Window) Describe() string { return describe(w.limit, w.window) }

func describe(limit, window int64) string {
	return fmt.Sprintf("a sliding-window counter of %d per %v", limit, time.Duration(window)*time.Microsecond)
}
