//go:build !race

package slidingwindow_test

// raceEnabled reports a build with the race detector.
const raceEnabled = false
