//go:build race

package proxy

// raceEnabled reports whether the race detector is on, which slows the
// test's own loops and relay's about tenfold.
const raceEnabled = true
