package balance

import "relay/internal/backend"

// Bounded load (Options.BalanceFactor) is consistent hashing with bounded
// loads, after Mirrokni, Thorup and Zadimoghaddam, "Consistent Hashing with
// Bounded Loads" (arXiv:1608.01350), as HAProxy's hash-balance-factor
// applies it to requests in flight. A key goes to its own backend while
// that backend is under the bound; only when it is over does the key walk
// its fallback order (the rehash sequence every ipHash key falls back
// along) to the first member under the bound. So keys move only off
// overloaded backends, each always to the same next place, and come back
// as soon as the load drops.
//
// The bound is HAProxy's, from chash_server_is_eligible in its
// src/lb_chash.c: the pool's capacity is the requests in flight over the
// members in rotation plus the one being placed, times the factor, rounded
// up: slots = ceil((inFlight+1) * factor/100). A member may take the
// request while its own in-flight count is below its weight's share of
// slots, and at least 1. With equal weights that is factor/100 times
// (inFlight+1)/n: the average plus the new request's 1/n, not the average
// plus one whole request. Where HAProxy hands out the remainder of
// slots/totalWeight by cumulative weight, so that the shares sum to slots
// exactly, relay rounds each share up: the shares then sum to at least
// slots, more than the requests in flight, so some member in rotation is
// always under the bound, whatever the order of the members.
//
// The counts are backend.InFlight, read without locks: picks running at
// the same moment may each see a member just under the bound and both
// take it, overshooting by the picks in flight between read and Acquire.
// With processes: N each process counts its own requests.

// bound is the capacity a pick compares members' loads against.
type bound struct {
	slots, weight int64
}

// boundFor measures bs's load: the requests in flight over the members
// that are in rotation (or operable, for a panicking pool), and their
// weight.
func boundFor(bs []*backend.Backend, f *Filter, factor int) bound {
	var load, weight int64
	for _, b := range bs {
		if b.Available() || f.Panic && b.Operable() {
			load += b.InFlight()
			weight += int64(b.EffectiveWeight())
		}
	}
	return bound{slots: ((load+1)*int64(factor) + 99) / 100, weight: weight}
}

// under reports whether b may take one more request.
func (l bound) under(b *backend.Backend) bool {
	if l.weight == 0 {
		return true
	}
	w := int64(b.EffectiveWeight())
	return b.InFlight() < max(1, (l.slots*w+l.weight-1)/l.weight)
}

// pickBounded is Pick under a balance factor: the first member of key's
// order (its own slot, the rehashes, then a scan) that f allows and that
// is under the bound; when none is, the first f allows.
func (p *ipHash) pickBounded(key uint64, f *Filter) *backend.Backend {
	l := boundFor(p.bs, f, p.factor)
	var first *backend.Backend
	if b := p.lookup(key); f.Allows(b) {
		if l.under(b) {
			return b
		}
		first = b
	}
	s := splitMix(key)
	for range fallbacks {
		if b := p.lookup(s.next()); f.Allows(b) {
			if l.under(b) {
				return b
			}
			if first == nil {
				first = b
			}
		}
	}
	start := int(key % uint64(len(p.bs)))
	for i := range p.bs {
		j := start + i
		if j >= len(p.bs) {
			j -= len(p.bs)
		}
		if b := p.bs[j]; f.Allows(b) {
			if l.under(b) {
				return b
			}
			if first == nil {
				first = b
			}
		}
	}
	return first
}
