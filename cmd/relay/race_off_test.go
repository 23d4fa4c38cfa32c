//go:build !race

package main

// raceEnabled reports whether the tests run with the race detector, in which
// case relay is built with it too.
const raceEnabled = false
