//go:build race

package memorystore_test

// raceEnabled reports a build with the race detector, which makes the
// floods of new keys ten times slower: they then run on smaller tables.
const raceEnabled = true
