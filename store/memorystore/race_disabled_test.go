//go:build !race

package memorystore_test

// raceEnabled reports a build with the race detector.
const raceEnabled = false
