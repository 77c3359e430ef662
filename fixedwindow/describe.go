package fixedwindow

import (
	"fmt"
	"time"

	"github.com/go-ratelimit/ratelimit/algorithm"
)

func init() {
	algorithm.RegisterKind(algorithm.KindFixedWindow, func(t algorithm.Tag) string { return describe(t.P0, t.P1) })
}

// Describe returns the window in words, for errors: "a fixed window of
// 100 per 1m0s".
func (w *Window) Describe() string { return describe(w.limit, w.window) }

func describe(limit, window int64) string {
	return fmt.Sprintf("a fixed window of %d per %v", limit, time.Duration(window)*time.Microsecond)
}
