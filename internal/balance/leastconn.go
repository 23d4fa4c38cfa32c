package balance

import (
	"math"
	"math/bits"

	"relay/internal/backend"
)

// NewLeastConn returns a picker that chooses the backend with the fewest
// requests in flight per unit of effective weight, as nginx's least_conn does: a
// weight-3 backend with 3 requests counts as loaded as a weight-1 backend
// with 1. With equal weights this is plain fewest-in-flight. Ties are broken
// uniformly at random, seeded from o.Rand.
//
// Counts come from backend.InFlight, which the proxy raises with Acquire
// right after the pick, so a burst of concurrent picks sees each other's load
// instead of piling onto the same idle backend. A pick reads every backend's
// counter; for large pools p2c is the cheaper choice. Backends the filter
// refuses are passed over.
func NewLeastConn(bs []*backend.Backend, o Options) Picker {
	if len(bs) == 0 {
		return empty{}
	}
	return &leastConn{bs: clone(bs), rand: o.randN()}
}

type leastConn struct {
	bs   []*backend.Backend
	rand func(n int) int
}

func (p *leastConn) Pick(_ uint64, f Filter) *backend.Backend {
	var best *backend.Backend
	var bestLoad, bestWeight int64
	ties := uint64(1)
	var tie splitMix
	for _, b := range p.bs {
		if !f.Allows(b) {
			continue
		}
		// Load per unit of weight, compared by cross-multiplying: exact,
		// and each backend's counters are read once.
		load, weight := b.InFlight(), int64(b.EffectiveWeight())
		if best == nil {
			best, bestLoad, bestWeight = b, load, weight
			continue
		}
		switch l, r := load*bestWeight, bestLoad*weight; {
		case l < r:
			best, bestLoad, bestWeight, ties = b, load, weight, 1
		case l == r:
			// Reservoir sampling: the k-th equally loaded backend replaces
			// the choice with probability 1/k, which leaves each of them
			// chosen with equal probability in one pass and no allocation.
			// In an idle pool every backend ties, so the draws come from a
			// local generator seeded once per pick instead of costing a
			// call to o.Rand each.
			if tie == 0 {
				tie = splitMix(p.rand(math.MaxInt)) | 1
			}
			ties++
			if hi, _ := bits.Mul64(tie.next(), ties); hi == 0 {
				best, bestLoad, bestWeight = b, load, weight
			}
		}
	}
	return best
}

// splitMix is the SplitMix64 generator: a few arithmetic steps per draw and
// its state is one word on the stack. Zero means not yet seeded.
type splitMix uint64

// Mix returns a well-spread 64-bit value derived from k (one SplitMix64
// step), for callers that draw from a hash key.
func Mix(k uint64) uint64 {
	s := splitMix(k)
	return s.next()
}

func (s *splitMix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// lessLoaded reports whether a, with aLoad requests in flight, is less loaded
// per unit of effective weight than b with bLoad. Cross-multiplying keeps
// the comparison exact without division.
func lessLoaded(a *backend.Backend, aLoad int64, b *backend.Backend, bLoad int64) bool {
	return aLoad*int64(b.EffectiveWeight()) < bLoad*int64(a.EffectiveWeight())
}
