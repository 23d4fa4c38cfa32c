package balance

import "relay/internal/backend"

// NewRandom returns a picker that chooses uniformly at random among the
// backends of bs the filter allows, with o.Rand, ignoring weights and keys. It keeps no shared state, so concurrent
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

func (p *random) Pick(_ uint64, f Filter) *backend.Backend {
	// Redrawing keeps the choice uniform over the allowed backends; when
	// most are refused a scan from a random start ends the search.
	for range redraws {
		if b := p.bs[p.rand(len(p.bs))]; f.Allows(b) {
			return b
		}
	}
	return scan(p.bs, p.rand(len(p.bs)), &f)
}

// redraws bounds the random draws a pick makes before it scans.
const redraws = 4
