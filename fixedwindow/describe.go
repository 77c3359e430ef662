package fixedwindow

import (
	"fmt"
	"time"
)

// Describe returns the window in words, for errors: "a fixed window of
// 100 per 1m0s".
func (w *Window) Describe() string { return describe(w.limit, w.window) }

func describe(limit, window int64) string {
	return fmt.Sprintf("a fixed window of %d per %v", limit, time.Duration(window)*time.Microsecond)
}
