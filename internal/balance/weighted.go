package balance

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"relay/internal/backend"
)

// Limits for precomputing the smooth cycle. Building it costs one step per
// backend per entry, so both its length and its total work are bounded; past
// either limit the picker runs nginx's loop under a mutex instead.
const (
	maxCycle     = 1 << 16
	maxCycleWork = 1 << 24
)

// NewWeightedRoundRobin returns a smooth weighted round-robin picker, the
// algorithm of nginx's upstream module: every pick, each backend's current
// weight grows by its weight, the largest wins and gives back the total. The
// heavy backend's turns are spread out instead of bunched together: weights
// 5,1,1 give a a b a c a a, and every run of sum(weights) consecutive picks
// holds each backend exactly weight times.
//
// The sequence repeats after sum(weights)/gcd(weights) picks, so when that
// cycle is small it is computed once here and Pick is a lock-free table
// lookup; otherwise Pick runs nginx's O(N) loop under a mutex. A backend the
// filter refuses has its turns skipped, and the position moves on with every
// probe, so the others keep their proportions among themselves (5,1,1 with
// b out: a gets 5 picks for c's 1) and a backend that returns gets no burst:
// it accumulated nothing while it was out.
//
// A retry (Filter.Retry) does not move the schedule: it draws a backend
// the filter allows at random, in proportion to the weights, with o.Rand.
// The next request's first pick is not shifted, and the retries of a
// backend that failed under load spread over the others by weight.
func NewWeightedRoundRobin(bs []*backend.Backend, o Options) Picker {
	if len(bs) == 0 {
		return empty{}
	}
	s := newSmooth(bs)
	s.rand = o.randN()
	if cycle := s.total; cycle <= maxCycle && cycle*int64(len(bs)) <= maxCycleWork {
		return s.table()
	}
	return s
}

// smooth is the classic O(N) nginx loop. It serves directly when the cycle
// is too long to precompute, and builds the table otherwise.
type smooth struct {
	mu      sync.Mutex
	bs      []*backend.Backend
	weight  []int64 // fixed once built: read without mu
	current []int64
	total   int64
	rand    func(n int) int
}

func newSmooth(bs []*backend.Backend) *smooth {
	g := int64(0)
	for _, b := range bs {
		g = gcd(g, int64(b.EffectiveWeight()))
	}
	s := &smooth{bs: clone(bs), weight: make([]int64, len(bs)), current: make([]int64, len(bs)), rand: rand.IntN}
	for i, b := range bs {
		// Dividing by the GCD changes no decision (every current weight
		// scales by the same factor) but shortens the cycle: 10,10,10 is
		// a cycle of 3, not 30.
		s.weight[i] = int64(b.EffectiveWeight()) / g
		s.total += s.weight[i]
	}
	return s
}

// next advances the smooth schedule by one pick; the caller holds mu or
// owns s exclusively.
func (s *smooth) next() int {
	best, bestWeight := 0, int64(math.MinInt64)
	current := s.current[:len(s.weight)]
	for i, w := range s.weight {
		c := current[i] + w
		current[i] = c
		// Strictly greater keeps ties with the earliest backend, as nginx
		// does, so the sequence depends only on the order of bs.
		if c > bestWeight {
			best, bestWeight = i, c
		}
	}
	current[best] -= s.total
	return best
}

func (s *smooth) Pick(_ uint64, f Filter) *backend.Backend {
	if f.Retry {
		return s.draw(&f)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A refused backend's turns pass to whoever comes next in the
	// schedule; after a few, a scan from the schedule's position finds
	// any allowed backend however heavy the refused ones are.
	for range 2 * len(s.bs) {
		if b := s.bs[s.next()]; f.Allows(b) {
			return b
		}
	}
	return scan(s.bs, s.next(), &f)
}

// draw picks a backend f allows at random, in proportion to the weights,
// leaving the schedule alone.
func (s *smooth) draw(f *Filter) *backend.Backend {
	var allowed int64
	for i, b := range s.bs {
		if f.Allows(b) {
			allowed += s.weight[i]
		}
	}
	if allowed == 0 {
		return nil
	}
	r := int64(s.rand(int(allowed)))
	for i, b := range s.bs {
		if !f.Allows(b) {
			continue
		}
		if r < s.weight[i] {
			return b
		}
		r -= s.weight[i]
	}
	return scan(s.bs, 0, f) // an allowed backend went out between the two passes
}

// table runs one full cycle of s. After total picks every backend has been
// chosen exactly weight times and all current weights are back to zero, so
// the cycle repeats from there unchanged.
func (s *smooth) table() *smoothTable {
	seq := make([]*backend.Backend, s.total)
	for k := range seq {
		seq[k] = s.bs[s.next()]
	}
	return &smoothTable{seq: seq, rand: s.rand}
}

type smoothTable struct {
	next atomic.Uint64
	seq  []*backend.Backend
	rand func(n int) int
}

func (p *smoothTable) Pick(_ uint64, f Filter) *backend.Backend {
	if f.Retry {
		// Each backend holds weight of the cycle's places, so a draw
		// from them follows the weights.
		return draw(p.seq, p.rand, &f)
	}
	return step(&p.next, p.seq, &f)
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
