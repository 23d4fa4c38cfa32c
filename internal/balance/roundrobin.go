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
//
// A retry (Filter.Retry) leaves the position where it is and draws among
// the backends the filter allows at random, with o.Rand: the next
// request's first pick is not shifted, and the retries of a backend that
// failed under load spread evenly over the others instead of all taking
// the backend after it.
func NewRoundRobin(bs []*backend.Backend, o Options) Picker {
	if len(bs) == 0 {
		return empty{}
	}
	return &roundRobin{bs: clone(bs), rand: o.randN()}
}

type roundRobin struct {
	next atomic.Uint64
	bs   []*backend.Backend
	rand func(n int) int
}

func (p *roundRobin) Pick(_ uint64, f Filter) *backend.Backend {
	if f.Retry {
		return draw(p.bs, p.rand, &f)
	}
	return step(&p.next, p.bs, &f)
}

// step takes the next backend of seq that f allows, advancing the shared
// position once per probe. After one turn's worth of probes it scans from
// where it stands: requests stepping at once advance the position between
// each other's probes, so a turn of probes need not have seen every
// backend, and a backend that f allows must still be found.
func step(next *atomic.Uint64, seq []*backend.Backend, f *Filter) *backend.Backend {
	n := uint64(len(seq))
	var i uint64
	for range seq {
		// A 64-bit counter never wraps in practice, so the cycle never jumps.
		i = (next.Add(1) - 1) % n
		if b := seq[i]; f.Allows(b) {
			return b
		}
	}
	return scan(seq, int(i), f)
}
