//go:build race

package slidingwindow_test

// raceEnabled reports a build with the race detector, which makes the
// accuracy measurement ten times slower: it then runs on fewer keys.
const raceEnabled = true
