// Package balance chooses a backend for each request. Each algorithm is one
// file holding a Picker built for one fixed slice of available backends; the
// registry maps configuration names to constructors.
//
// Pickers never see health: the proxy rebuilds a picker from the healthy
// backends whenever membership changes, and requests use it without locks.
package balance

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"relay/internal/backend"
)

// Picker picks one backend for a request. key is the request's hash key (the
// client address hash for ip-hash); algorithms that do not hash ignore it.
// Pick returns nil only when the picker holds no backends. Pick must be safe
// for concurrent use and must not allocate.
type Picker interface {
	Pick(key uint64) *backend.Backend
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
}

func (o Options) randN() func(n int) int {
	if o.Rand != nil {
		return o.Rand
	}
	return rand.IntN
}

// Constructor builds a Picker for a fixed slice of backends. Build never
// passes an empty slice, so a new algorithm may assume at least one backend
// (the built-in constructors also accept none and return a picker that
// always returns nil). The picker must copy bs rather than keep the caller's
// slice, which may be reused.
type Constructor func(bs []*backend.Backend, o Options) Picker

// registry maps every accepted algorithm name, aliases included, to its
// constructor. Adding an algorithm is one file plus one line here.
var registry = map[string]Constructor{
	"round-robin":          NewRoundRobin,
	"roundrobin":           NewRoundRobin,
	"weighted-round-robin": NewWeightedRoundRobin,
	"random":               NewRandom,
	"least-conn":           NewLeastConn,
	"leastconn":            NewLeastConn,
	"ip-hash":              NewIPHash,
	"p2c":                  NewP2C,
}

// Lookup returns the constructor registered under name.
func Lookup(name string) (Constructor, error) {
	c, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown algorithm %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return c, nil
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

// Build constructs the picker registered under name for bs. An empty bs gives
// a picker that always returns nil.
func Build(name string, bs []*backend.Backend, o Options) (Picker, error) {
	c, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	if len(bs) == 0 {
		return empty{}, nil
	}
	return c(bs, o), nil
}

// clone copies bs so that a picker never sees later changes to the caller's
// slice.
func clone(bs []*backend.Backend) []*backend.Backend {
	return append([]*backend.Backend(nil), bs...)
}

type empty struct{}

func (empty) Pick(uint64) *backend.Backend { return nil }
