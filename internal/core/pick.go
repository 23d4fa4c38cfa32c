package core

import (
	"relay/internal/backend"
	"relay/internal/balance"
)

// pick chooses the backend for the request's next attempt and takes a
// place on it; probe says the place is the backend's half-open probe. It
// returns nil when no backend can take the request now: r.full then says
// a place may open (the caller waits in the queue).
//
// The picker chooses among the backends in rotation that the request has
// not tried or passed by (balance.Filter); a retry's pick does not move a
// shared position (Filter.Retry), so retries do not shift where the next
// requests' first picks land. A chosen backend is passed by, and the
// picker asked again, when it is warming up in slow start and the draw
// says so, when it is at its request limit, or when it is half-open with
// its probe out. When every backend left is warming, one is taken anyway.
// When the first pick finds no backend at all, none is in rotation (or
// the only ones are half-open with their probe out): the pool panics and
// picks among every member an operator has not taken out, rather than
// answer 503 to requests a backend might still serve. Before the picker,
// a first pick tries the member the request's sticky cookie names.
func (r *passage) pick() (b *backend.Backend, probe bool) {
	for {
		if r.tries == 0 && r.picks == 0 {
			// A first pick goes to the member the sticky cookie names,
			// when it may take the request (sticky.go).
			if b, probe, ok := r.stickyPick(); ok {
				return b, probe
			}
		}
		b = nil
		if r.picks < 2*balance.MaxAttempts {
			f := r.f
			f.Retry = r.tries > 0
			b = r.snap.picker.Pick(r.key, f)
			r.picks++
		}
		if b == nil {
			switch {
			case r.passedCold:
				// Every backend left is warming: take one anyway.
				r.f, r.warming, r.passedCold, r.picks = r.tried, false, false, 0
				continue
			case r.full:
				return nil, false
			case r.tries == 0 && !r.tried.Panic && len(r.snap.members) > 0:
				r.tried.Panic = true
				r.f, r.picks = r.tried, 0
				r.p.enterPanic()
				continue
			}
			return nil, false
		}
		if r.warming && r.p.cold(b, r.key) {
			r.passBy(b)
			r.passedCold = true
			continue
		}
		ok, probe, full := b.Admit(r.p.limit(b), !r.tried.Panic)
		if !ok {
			r.passBy(b)
			r.full = r.full || full
			continue
		}
		return b, probe
	}
}

// passBy adds b to r.f, the backends this request tried or passed by. When
// r.f can hold no more it starts again from r.tried, so that a backend the
// request was tried on is never picked again.
func (r *passage) passBy(b *backend.Backend) {
	if r.f.Tried() == balance.MaxAttempts {
		r.f = r.tried
	}
	r.f.Add(b)
}

// enterPanic notes that the pool has no backend in rotation and balances
// over every member; the first request to find it so logs it.
func (p *Pool) enterPanic() {
	if !p.panicking.Load() && p.panicking.CompareAndSwap(false, true) {
		p.core.cfg.Logger.Warn("no backend in rotation: balancing over all of them", "pool", p.cfg().Name)
	}
}

// leavePanic notes that a backend is in rotation again.
func (p *Pool) leavePanic() {
	if p.panicking.Load() && p.panicking.CompareAndSwap(true, false) {
		p.core.cfg.Logger.Info("a backend is back in rotation: panic over", "pool", p.cfg().Name)
	}
}
