package backend

import "time"

// A backend's circuit breaker state. The policy (how many failures open it,
// for how long, how many backends of a pool may be out at once) is the
// forwarding core's; the backend holds what the policy reads and writes, so
// it outlives snapshots and reloads like the other conditions:
//
//	closed     no ejection: every request may go through
//	open       ejected until a time (the ejected condition)
//	half-open  the ejection has run out but no request has succeeded since:
//	           one request at a time goes through (Admit hands out the one
//	           probe place), and its outcome closes or reopens the breaker

// Fail records a forwarding failure and returns how many failed in a row.
func (b *Backend) Fail() (consecutive int) {
	b.failures.Add(1)
	return int(b.consecutive.Add(1))
}

// The breaker's state is the address's: failures in a row count whichever
// pool's request failed, and an ejection holds the address out of every
// pool that has it.

// Succeed records a request the backend answered well, ending a run of
// failures. While there is none it only reads, so the steady state writes
// nothing shared.
func (h *Host) Succeed() {
	if h.consecutive.Load() != 0 {
		h.consecutive.Store(0)
	}
}

// ConsecutiveFailures is the length of the current run of failures.
func (h *Host) ConsecutiveFailures() int { return int(h.consecutive.Load()) }

// Trip counts an opening of the breaker and returns how many openings
// followed one another with no success between them, for the open time to
// grow with each.
func (h *Host) Trip() int { return int(h.trips.Add(1)) }

// Trips is the number of breaker openings since the last success.
func (h *Host) Trips() int { return int(h.trips.Load()) }

// SetTrips sets the openings count, for a breaker another process opened.
func (h *Host) SetTrips(n int) { h.trips.Store(int32(n)) }

// Close ends the breaker's open or half-open state after a success: the
// ejection ends and the next opening counts from one again. It reports
// whether there was an ejection to end.
func (h *Host) Close() (changed bool) {
	h.trips.Store(0)
	return h.Restore()
}

// Ejected reports whether the backend is open or half-open: ejected, with
// or without time left.
func (h *Host) Ejected() bool { return h.cond.Load()&ejected != 0 }

// Admit counts a request in flight on a backend the picker chose, if the
// backend may take it now, and reports what it did:
//
//   - ok: the request is in flight (call Release when it ends).
//   - probe: it is a half-open breaker's one probe request; call EndProbe
//     once its outcome is recorded. With gate false (a pool balancing over
//     every backend in panic) half-open backends take requests freely.
//   - full: the backend has limit requests in flight already (limit > 0);
//     the request should wait for a place.
//
// A half-open backend whose probe is out refuses with neither ok nor full,
// and so does one whose breaker opened again after the picker chose it
// (the probe before this request failed meanwhile).
func (b *Backend) Admit(limit int64, gate bool) (ok, probe, full bool) {
	if gate && b.Host.cond.Load()&ejected != 0 {
		if time.Now().UnixNano() < b.ejectedUntil.Load() {
			return false, false, false // open
		}
		if !b.probing.CompareAndSwap(false, true) {
			return false, false, false
		}
		probe = true
	}
	if limit <= 0 {
		b.inFlight.Add(1)
		b.served.Add(1)
		return true, probe, false
	}
	for {
		n := b.inFlight.Load()
		if n >= limit {
			if probe {
				b.probing.Store(false)
			}
			return false, false, true
		}
		if b.inFlight.CompareAndSwap(n, n+1) {
			b.served.Add(1)
			return true, probe, false
		}
	}
}

// EndProbe gives back the half-open probe place Admit handed out.
func (h *Host) EndProbe() { h.probing.Store(false) }

// EjectionExceeds reports whether ejecting b as well would hold out more
// than maxPercent of the backends bs: the bound on failure detection that
// a pool's breakers keep, and the control keeps for every process (judged
// over the members of the pool that reported the opening).
func EjectionExceeds(bs []*Backend, b *Backend, maxPercent int) bool {
	out := 1
	for _, m := range bs {
		if m != b && m.Ejected() {
			out++
		}
	}
	return out*100 > maxPercent*len(bs)
}
