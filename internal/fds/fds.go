// Package fds is a serving process's budget of file descriptors. Every
// descriptor a client can make relay hold (its own connection, the
// upstream connections its requests and HTTP/2 streams are forwarded on,
// tunnels, health probes) takes a place in one budget, set below the
// process's open-file limit (RLIMIT_NOFILE) so that relay itself never
// meets EMFILE: past the budget it refuses new work (503, REFUSED_STREAM,
// a closed connection) and goes on serving what it has, while the
// descriptors held back for listeners, logs and the admin listener stay
// free. nginx's worker_connections counts client and upstream connections
// against one number in the same way.
//
// A budget is per process: the open-file limit is. A nil *Budget has no
// bound, so code and tests that need none pass nil.
package fds

import (
	"errors"
	"sync/atomic"
	"syscall"
)

// Budget counts the descriptors taken against a limit.
type Budget struct {
	limit   int64
	used    atomic.Int64
	refused atomic.Uint64
	reclaim atomic.Pointer[func() bool] // SetReclaim's
}

// New returns a budget of limit descriptors; limit <= 0 means none may be
// taken.
func New(limit int) *Budget { return &Budget{limit: int64(max(limit, 0))} }

// Reserve is how many descriptors of an open-file limit stay outside the
// budget, for what relay needs whatever its clients do: listeners, the
// log, the supervisor's channel, the admin listener's connections
// (admin.MaxConns), etcd and name lookups, the runtime's own. A quarter
// of a small limit, at most 256.
func Reserve(limit int) int { return min(256, limit/4) }

// ForLimit returns the budget for an open-file limit: the limit less its
// Reserve.
func ForLimit(limit int) *Budget { return New(limit - Reserve(limit)) }

// SetReclaim gives the budget a way to free a place when none is left:
// reclaim closes one descriptor relay keeps only in case it is needed
// again (an idle pooled upstream connection), which gives its place back,
// and reports whether it found one. Without it a budget spent partly on
// idle connections would refuse clients while those sit unused, until
// their idle timeout; nginx reuses its idle connections the same way
// when it runs out.
func (b *Budget) SetReclaim(reclaim func() bool) { b.reclaim.Store(&reclaim) }

// Take takes a descriptor's place and reports whether there was one; a
// caller that got one gives it back with Give when the descriptor closes.
// With no place left it first has an idle descriptor closed (SetReclaim).
func (b *Budget) Take() bool {
	if b == nil {
		return true
	}
	for {
		if b.used.Add(1) <= b.limit {
			return true
		}
		b.used.Add(-1)
		// Each round closes an idle descriptor, of which there are
		// few, so the loop ends; a place freed may go to another
		// Take first.
		if !b.reclaimOne() {
			b.refused.Add(1)
			return false
		}
	}
}

// reclaimOne has an idle descriptor closed, and reports whether one was.
func (b *Budget) reclaimOne() bool {
	f := b.reclaim.Load()
	return f != nil && (*f)()
}

// Give gives back a place Take gave.
func (b *Budget) Give() {
	if b != nil {
		b.used.Add(-1)
	}
}

// Short reports whether the budget is spent: the next Take would fail.
// A budget spent with an idle descriptor to reclaim has that closed, and
// is not short.
func (b *Budget) Short() bool {
	if b == nil || b.used.Load() < b.limit {
		return false
	}
	return !b.reclaimOne() || b.used.Load() >= b.limit
}

// Used is the number of places taken.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Limit is the budget's size; 0 for a nil budget, which has none.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Refused counts the Takes that found no place.
func (b *Budget) Refused() uint64 {
	if b == nil {
		return 0
	}
	return b.refused.Load()
}

// ErrSpent is the error of work refused for want of descriptors.
var ErrSpent = errors.New("relay is out of file descriptors")

// IsExhaustion reports whether err is the system refusing relay a
// descriptor (EMFILE, ENFILE) or the memory for a socket (ENOBUFS,
// ENOMEM), or ErrSpent: relay's own shortage, never a backend's fault.
func IsExhaustion(err error) bool {
	return errors.Is(err, ErrSpent) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}
