package balance

import (
	"sync/atomic"

	"relay/internal/backend"
)

// NewRoundRobin returns a picker that hands requests to bs in order, one
// each, ignoring weights and keys.
//
// Because the picker only ever holds available backends, a backend that
// leaves simply drops out of the cycle and its share spreads evenly over the
// rest, instead of falling on its neighbour as it would if dead backends were
// skipped at pick time.
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

func (p *roundRobin) Pick(uint64) *backend.Backend {
	// A 64-bit counter never wraps in practice, so the cycle never jumps.
	n := p.next.Add(1) - 1
	return p.bs[n%uint64(len(p.bs))]
}
