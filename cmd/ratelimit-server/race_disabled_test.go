//go:build !race

package main

// raceEnabled: see race_enabled_test.go.
const raceEnabled = false
