// Package balance chooses a backend for each request. Each algorithm is one
// file holding a Picker built for one fixed slice of backends, a pool's
// members; the registry maps configuration names to algorithms.
//
// A picker is built once per membership change (a backend added, removed or
// reweighted) and used by requests without locks. Whether a member may be
// picked now (backend.Available: health, ejection, drain...) and whether this
// request has tried it already is the Filter's to say, at pick time: a
// backend going out or coming back costs no rebuild. Each algorithm skips
// what the filter refuses in its own fair way, so the share of a backend
// that is out spreads over the others instead of falling on one of them.
package balance

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"relay/internal/backend"
)

// Picker picks one backend for a request. key is the request's hash key (a
// hash of what the pool's KeySpec names, the client address by default);
// algorithms that do not hash ignore it.
// Pick returns a backend f allows, or nil when it finds none. Pick must be
// safe for concurrent use and must not allocate.
//
// f is passed by value: a pointer to the caller's filter, passed through an
// interface method, would make it escape and cost an allocation per request.
type Picker interface {
	Pick(key uint64, f Filter) *backend.Backend
}

// MaxAttempts bounds the backends one request may be tried on, the first
// try included; a Filter remembers that many.
const MaxAttempts = 8

// Filter says which backends a pick may return: those that may be picked
// now (backend.Available) and that this request has not tried yet. The zero
// value allows every available backend.
type Filter struct {
	tried [MaxAttempts]*backend.Backend
	n     int
	// Panic widens the filter to every backend an operator has not taken
	// out (drained or disabled), whatever its health checks and breaker
	// say: the pool has none in rotation and tries them all rather than
	// refuse the request.
	Panic bool
	// Retry says the request was tried on a backend already. Pickers
	// that keep a shared position (round-robin, weighted round-robin)
	// choose a retry without moving it: the retries of the requests that
	// failed on one backend would otherwise take the turns that follow
	// it, and the next requests' first picks would land on that backend
	// again and again.
	Retry bool
}

// Add remembers a backend the request was tried on; beyond MaxAttempts it
// is ignored.
func (f *Filter) Add(b *backend.Backend) {
	if f.n < len(f.tried) {
		f.tried[f.n] = b
		f.n++
	}
}

// Tried is how many backends were added.
func (f *Filter) Tried() int { return f.n }

// Allows reports whether a pick may return b.
func (f *Filter) Allows(b *backend.Backend) bool {
	if !b.Available() && !(f.Panic && b.Operable()) {
		return false
	}
	for _, t := range f.tried[:f.n] {
		if t == b {
			return false
		}
	}
	return true
}

// Options carries what some algorithms need besides the backends.
// The zero value works.
type Options struct {
	// Rand returns a uniformly random integer in [0, n) for n >= 1. It is
	// called from concurrent picks, so it must be safe for concurrent use and
	// must not allocate. Nil means math/rand/v2's generator, which is both.
	// Tests inject their own to make random, least-conn and p2c
	// deterministic.
	Rand func(n int) int
	// BalanceFactor, when above 0, bounds the load of hashing pickers:
	// a key whose backend has more than BalanceFactor percent of its
	// share of the requests in flight goes to the next backend of its
	// fallback order that has less (bounded.go). 0 turns it off.
	BalanceFactor int
}

func (o Options) randN() func(n int) int {
	if o.Rand != nil {
		return o.Rand
	}
	return rand.IntN
}

// Constructor builds a Picker for a fixed slice of backends, a pool's
// members; weights are read here, so a weight change is a membership
// change. The built-in constructors accept an empty slice and return a
// picker that always returns nil. The picker must copy bs rather than keep
// the caller's slice, which may be reused.
type Constructor func(bs []*backend.Backend, o Options) Picker

// Algorithm is what the rest of relay needs to know about an algorithm.
type Algorithm struct {
	// Name is the canonical name.
	Name string
	// New builds the algorithm's picker.
	New Constructor
	// HashesClient says Pick's key must be the request's hash key: a hash
	// of the client address (HashAddr) or of what the pool's KeySpec
	// names (HashKey); other algorithms ignore the key, so callers
	// need not compute it.
	HashesClient bool
	// IgnoresWeights says every backend gets the same share whatever its
	// weight, so relay can warn when the configured weights differ.
	IgnoresWeights bool
}

var (
	roundRobinAlg = Algorithm{Name: "round-robin", New: NewRoundRobin, IgnoresWeights: true}
	leastConnAlg  = Algorithm{Name: "least-conn", New: NewLeastConn}
)

// registry maps every accepted algorithm name, aliases included, to its
// algorithm. Adding an algorithm is one file plus one line here.
var registry = map[string]Algorithm{
	"round-robin":          roundRobinAlg,
	"roundrobin":           roundRobinAlg,
	"weighted-round-robin": {Name: "weighted-round-robin", New: NewWeightedRoundRobin},
	"random":               {Name: "random", New: NewRandom, IgnoresWeights: true},
	"least-conn":           leastConnAlg,
	"leastconn":            leastConnAlg,
	"ip-hash":              {Name: "ip-hash", New: NewIPHash, HashesClient: true},
	"p2c":                  {Name: "p2c", New: NewP2C},
}

// Lookup returns the algorithm registered under name; aliases give their
// canonical algorithm.
func Lookup(name string) (Algorithm, error) {
	a, ok := registry[name]
	if !ok {
		return Algorithm{}, fmt.Errorf("unknown algorithm %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return a, nil
}

// Names lists every registered algorithm name, aliases included, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// IgnoringWeights lists the registered names, aliases included, of the
// algorithms that ignore weights, sorted.
func IgnoringWeights() []string {
	var names []string
	for _, n := range Names() {
		if registry[n].IgnoresWeights {
			names = append(names, n)
		}
	}
	return names
}

// Hashing lists the registered names, aliases included, of the algorithms
// that hash a key (HashesClient), sorted: the ones hash_key and
// hash_balance_factor apply to.
func Hashing() []string {
	var names []string
	for _, n := range Names() {
		if registry[n].HashesClient {
			names = append(names, n)
		}
	}
	return names
}

// Build constructs the picker registered under name for bs. An empty bs gives
// a picker that always returns nil.
func Build(name string, bs []*backend.Backend, o Options) (Picker, error) {
	a, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if len(bs) == 0 {
		return empty{}, nil
	}
	return a.New(bs, o), nil
}

// clone copies bs so that a picker never sees later changes to the caller's
// slice.
func clone(bs []*backend.Backend) []*backend.Backend {
	return append([]*backend.Backend(nil), bs...)
}

type empty struct{}

func (empty) Pick(uint64, Filter) *backend.Backend { return nil }

// scan returns the first backend f allows, starting at bs[start] and
// wrapping around: the fallback when drawing or stepping found none.
func scan(bs []*backend.Backend, start int, f *Filter) *backend.Backend {
	for i := range bs {
		j := start + i
		if j >= len(bs) {
			j -= len(bs)
		}
		if f.Allows(bs[j]) {
			return bs[j]
		}
	}
	return nil
}
