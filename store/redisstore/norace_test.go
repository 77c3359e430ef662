//go:build !race

package redisstore

// raceEnabled reports a build with the race detector.
const raceEnabled = false
