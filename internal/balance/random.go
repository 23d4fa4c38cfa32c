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
	return draw(p.bs, p.rand, &f)
}

// draw chooses uniformly at random among the entries of bs that f allows.
// Redrawing keeps the choice uniform over them; when most are refused a
// scan from a random start ends the search.
func draw(bs []*backend.Backend, rand func(n int) int, f *Filter) *backend.Backend {
	for range redraws {
		if b := bs[rand(len(bs))]; f.Allows(b) {
			return b
		}
	}
	return scan(bs, rand(len(bs)), f)
}

// redraws bounds the random draws a pick makes before it scans.
const redraws = 4
