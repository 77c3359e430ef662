//go:build race

package redisstore

// raceEnabled reports a build with the race detector, under which
// sync.Pool drops items at random: allocation counts mean nothing then.
const raceEnabled = true
