//go:build race

package compress

// raceEnabled reports whether the race detector is on. It makes
// sync.Pool drop a share of what is put back, on purpose, so the pool's
// steady state cannot be measured under it.
const raceEnabled = true
