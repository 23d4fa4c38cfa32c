package balance

import "relay/internal/backend"

// NewP2C returns a power-of-two-choices picker: it draws two distinct
// backends uniformly with o.Rand and takes the one with fewer requests in
// flight per unit of weight (on a tie, the first drawn). Unlike least-conn it
// reads two counters instead of all of them, so a pick costs the same at
// 1,000 backends as at 3, and the randomness keeps a burst of simultaneous
// picks from all landing on the single least-loaded backend.
func NewP2C(bs []*backend.Backend, o Options) Picker {
	if len(bs) == 0 {
		return empty{}
	}
	return &p2c{bs: clone(bs), rand: o.randN()}
}

type p2c struct {
	bs   []*backend.Backend
	rand func(n int) int
}

func (p *p2c) Pick(uint64) *backend.Backend {
	n := len(p.bs)
	if n == 1 {
		return p.bs[0]
	}
	i := p.rand(n)
	// Drawing from n-1 and stepping over i gives a uniform second choice
	// that is never the first.
	j := p.rand(n - 1)
	if j >= i {
		j++
	}
	a, b := p.bs[i], p.bs[j]
	if lessLoaded(b, b.InFlight(), a, a.InFlight()) {
		return b
	}
	return a
}
