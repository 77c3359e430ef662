//go:build !race

package redistable_test

// raceEnabled reports a build with the race detector.
const raceEnabled = false
