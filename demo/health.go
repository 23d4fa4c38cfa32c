package demo

import "sync/atomic"

// Health is the switch behind /health. The zero value is healthy. It is safe
// for concurrent use, so a signal handler can flip it while requests read it.
type Health struct {
	failing atomic.Bool
}

// SetFailing makes /health answer 503 (true) or 200 (false).
func (h *Health) SetFailing(failing bool) { h.failing.Store(failing) }

// Failing reports whether /health answers 503.
func (h *Health) Failing() bool { return h.failing.Load() }

// Toggle flips the switch and returns the new state.
func (h *Health) Toggle() (failing bool) {
	for {
		old := h.failing.Load()
		if h.failing.CompareAndSwap(old, !old) {
			return !old
		}
	}
}
