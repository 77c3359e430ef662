package gcra

import (
	"fmt"
	"time"
)

// Describe returns the meter in words, for errors: "GCRA, burst 100, one
// every 36s".
func (m *Meter) Describe() string { return describe(m.burst, m.every) }

func describe(burst, every int64) string {
	return fmt.Sprintf("GCRA, burst %d, one every %v", burst, time.Duration(every)*time.Microsecond)
}
