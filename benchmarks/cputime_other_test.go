//go:build !unix

package benchmarks

import "time"

// cpuTime is 0 where the process's CPU time is not read: cpu-µs/op then
// reports 0.
func cpuTime() time.Duration { return 0 }
