package health

import (
	"time"

	"relay/internal/fds"
)

// shortLogEvery spaces the warnings that probes found no descriptor.
const shortLogEvery = 10 * time.Second

// takePlace gives t's probe a place in the descriptor budget, unless it
// holds one already (a probe that keeps its connection keeps its place),
// and reports whether it has one.
func (c *Checker) takePlace(t *target) bool {
	if t.place.Load() {
		return true
	}
	if !c.fds.Take() {
		c.noPlace(t, fds.ErrSpent)
		return false
	}
	if !t.place.CompareAndSwap(false, true) {
		c.fds.Give() // another check of t took one meanwhile
	}
	return true
}

// givePlace gives back t's place, once its connection is closed.
func (c *Checker) givePlace(t *target) {
	if t.place.CompareAndSwap(true, false) {
		c.fds.Give()
	}
}

// noPlace notes a probe skipped for want of a descriptor: the backend
// keeps its state, and a warning goes out at most every shortLogEvery.
func (c *Checker) noPlace(t *target, err error) {
	c.short.Warn("health check skipped: relay is out of file descriptors; the backend keeps its state",
		"backend", t.backend().Name, "err", err.Error())
}
