package balance

import (
	"sync/atomic"

	"relay/internal/backend"
)

// NewRoundRobin returns a picker that hands requests to bs in order, one
// each, ignoring weights and keys.
//
// A backend the filter refuses is skipped, and the shared position advances
// on every probe, skipped ones included: the next request starts after the
// backend that was skipped to, so a backend that is out has its share spread
// evenly over the rest (with a b c d and b out: a c d a c d) instead of
// doubling its neighbour's.
func NewRoundRobin(bs []*backend.Backend, _ Options) Picker {
	if len(bs) == 0 {
		return empty{}
	}
	return &roundRobin{bs: clone(bs)}
}

type roundRobin struct {
	next atomic.Uint64
	bs   []*backend.Backend
}

func (p *roundRobin) Pick(_ uint64, f Filter) *backend.Backend {
	return step(&p.next, p.bs, &f)
}

// step takes the next backend of seq that f allows, advancing the shared
// position once per probe, and gives up after one full turn.
func step(next *atomic.Uint64, seq []*backend.Backend, f *Filter) *backend.Backend {
	n := uint64(len(seq))
	for range seq {
		// A 64-bit counter never wraps in practice, so the cycle never jumps.
		if b := seq[(next.Add(1)-1)%n]; f.Allows(b) {
			return b
		}
	}
	return nil
}
