package balance

import "relay/internal/backend"

// NewRandom returns a picker that chooses uniformly at random among bs with
// o.Rand, ignoring weights and keys. It keeps no shared state, so concurrent
// picks never contend.
func NewRandom(bs []*backend.Backend, o Options) Picker {
	if len(bs) == 0 {
		return empty{}
	}
	return &random{bs: clone(bs), rand: o.randN()}
}

type random struct {
	bs   []*backend.Backend
	rand func(n int) int
}

func (p *random) Pick(uint64) *backend.Backend {
	return p.bs[p.rand(len(p.bs))]
}
