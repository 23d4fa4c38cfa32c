package balance

import "relay/internal/backend"

// NewP2C returns a power-of-two-choices picker: it draws two distinct
// backends the filter allows, uniformly with o.Rand, and takes the one with
// fewer requests in flight per unit of effective weight (on a tie, the
// first drawn). Unlike least-conn it
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

func (p *p2c) Pick(_ uint64, f Filter) *backend.Backend {
	n := len(p.bs)
	i := p.draw(n, -1, &f)
	if i < 0 {
		return nil
	}
	a := p.bs[i]
	j := p.draw(n, i, &f)
	if j < 0 {
		return a // the only one allowed
	}
	b := p.bs[j]
	if lessLoaded(b, b.InFlight(), a, a.InFlight()) {
		return b
	}
	return a
}

// draw returns the index of a backend f allows other than not, drawn
// uniformly, or -1 when there is none. After a few refused draws it scans
// from a random start.
func (p *p2c) draw(n, not int, f *Filter) int {
	if not >= 0 && n == 1 {
		return -1
	}
	for range redraws {
		var i int
		if not < 0 {
			i = p.rand(n)
		} else {
			// Drawing from n-1 and stepping over not gives a uniform
			// choice that is never not.
			if i = p.rand(n - 1); i >= not {
				i++
			}
		}
		if f.Allows(p.bs[i]) {
			return i
		}
	}
	start := p.rand(n)
	for k := range n {
		i := (start + k) % n
		if i != not && f.Allows(p.bs[i]) {
			return i
		}
	}
	return -1
}
