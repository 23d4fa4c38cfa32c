// Package backend holds relay's upstream servers in two layers. A Host is
// an address: its identity (URL, dial address, TLS settings) and what is
// true of it whichever pools hold it, whether its active checks pass and
// its circuit breaker. A Backend is one membership of a Host in a pool:
// its weight, its request cap, the requests it has in flight, an
// operator's drain or disable, slow start. Requests, health checks and
// operators share both through atomics.
//
// Each condition has one owner and is set and cleared only by it: failing
// active checks (the health checker, on the Host), ejected until a time
// (the circuit breaker, on the Host), draining and disabled (the operator,
// on the Backend), effective weight (slow start, the operator). Available
// combines them, in one place, into "may be picked now", so a passing
// health check can no longer undo an ejection or a drain.
//
// Hosts and Backends outlive snapshots and reloads: pickers are rebuilt
// around the same *Backend values, so least-connection counts and failure
// history carry over.
package backend

import (
	"fmt"
	"net/url"
	"sync/atomic"

	"relay/internal/stats"
)

// Backend is one member of a pool: an address (its Host, whose fields and
// methods it carries) with what the pool gives it, its weight and request
// cap, and what happens to it there: requests in flight, an operator's
// drain or disable, slow start. Identity fields are set by New or
// Host.Member and never change; runtime state is only touched through
// methods.
type Backend struct {
	*Host
	// Pool names the pool the membership is in; "" for a backend made
	// alone (New).
	Pool string
	// Weight is the relative share of traffic, at least 1.
	Weight int
	// Requests counts the requests the member answered (the forwarding
	// core observes each once it is done).
	Requests stats.Requests

	// cond has one bit per condition of the membership that keeps it out
	// of rotation (draining, disabled); Available adds the Host's, so it
	// is two atomic loads while none is set.
	cond        atomic.Uint32
	weight      atomic.Int64 // effective weight
	inFlight    atomic.Int64
	served      atomic.Uint64
	failures    atomic.Uint64
	returned    atomic.Int64 // when it last came into rotation, for slow start
	maxRequests atomic.Int64 // cap on requests in flight; 0: the pool's default
}

// New returns a backend for u with the given weight over an address of its
// own. It starts healthy (optimistic); the health checker decides otherwise
// before traffic is served. The port defaults to 80 for http and 443 for
// https when u has none.
func New(u *url.URL, weight int) (*Backend, error) {
	h, err := NewHost(u)
	if err != nil {
		return nil, err
	}
	return h.Member("", weight)
}

// Member returns a new membership of the address in pool with the given
// weight: it shares the address's breaker and TLS settings with every
// other membership of it.
func (h *Host) Member(pool string, weight int) (*Backend, error) {
	if weight < 1 {
		return nil, fmt.Errorf("backend %q: weight %d is below 1", h.URL, weight)
	}
	b := &Backend{Host: h, Pool: pool, Weight: weight}
	b.weight.Store(int64(weight))
	return b, nil
}

// InFlight is the number of requests currently forwarded to the backend.
func (b *Backend) InFlight() int64 { return b.inFlight.Load() }

// Acquire counts a request as in flight. The proxy calls it right after the
// pick, so a burst of picks sees each other's load.
func (b *Backend) Acquire() { b.inFlight.Add(1); b.served.Add(1) }

// Release ends a request started with Acquire.
func (b *Backend) Release() { b.inFlight.Add(-1) }

// Served is the number of requests ever forwarded to the backend.
func (b *Backend) Served() uint64 { return b.served.Load() }

// Failures is the number of forwarding failures (dial errors, timeouts,
// broken responses, statuses a pool counts as failures) recorded with Fail.
func (b *Backend) Failures() uint64 { return b.failures.Load() }

// MaxRequests is the cap on requests in flight to the backend; 0 leaves
// it to its pool's default.
func (b *Backend) MaxRequests() int { return int(b.maxRequests.Load()) }

// SetMaxRequests changes the cap on requests in flight to the backend
// while it serves (0: the pool's default), as a reload asks. Requests
// already in flight finish; a lower cap admits no new one until they are
// below it.
func (b *Backend) SetMaxRequests(n int) { b.maxRequests.Store(int64(max(n, 0))) }

// SetMembership gives the backend what its pool's membership says now,
// while it serves: its weight (the effective weight, at least 1) and its
// cap on requests in flight (0: the pool's default), already this
// process's share of it. It is the one place a membership's numbers reach
// a backend, for the control's backends and every process's alike.
func (b *Backend) SetMembership(weight, maxRequests int) {
	b.SetEffectiveWeight(weight)
	b.SetMaxRequests(maxRequests)
}

// String returns the backend's name.
func (b *Backend) String() string { return b.Name }
