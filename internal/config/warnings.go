package config

import (
	"fmt"
	"slices"
	"strings"
)

// Warnings lists what in a valid c is likely not what was meant, located
// as problems are. None of them stops relay: relay -check prints them
// and still succeeds, and relay logs them when it starts and reloads.
func (c *Config) Warnings(opts Options) []Problem {
	var ws []Problem
	for _, np := range c.allPoolsDeclared() {
		if p, ok := c.weightsIgnored(np, opts); ok {
			ws = append(ws, p)
		}
		ws = append(ws, c.hashingUnused(np, opts)...)
	}
	ws = append(ws, c.routeWarnings()...)
	ws = append(ws, c.clientAuthWarnings()...)
	return ws
}

// WeightsIgnored is the warning for members whose weights differ under
// an algorithm that ignores weights, for a membership known only at run
// time (the admin API, etcd); weights are the members' weights. It
// returns "" when the weights count or are all the same.
func WeightsIgnored(algorithm string, weights []int, opts Options) string {
	if !differ(weights) || !slices.Contains(opts.IgnoringWeights, algorithm) {
		return ""
	}
	return "backend weights differ, but " + ignores("algorithm "+algorithm)
}

// ignores says that alg ignores weights and what to do about it.
func ignores(alg string) string {
	return alg + " ignores them: every backend gets the same share; set algorithm: weighted-round-robin " +
		"for weights to count (least-conn, p2c and ip-hash weigh backends too)"
}

func differ(weights []int) bool {
	for _, w := range weights {
		if w != weights[0] {
			return true
		}
	}
	return false
}

// weightsIgnored is the weights warning for a pool's backends, on the
// first backend whose weight differs from the first one's.
func (c *Config) weightsIgnored(np NamedPool, opts Options) (Problem, bool) {
	if !slices.Contains(opts.IgnoringWeights, np.Algorithm) {
		return Problem{}, false
	}
	for i, b := range np.Backends {
		if b.Weight == np.Backends[0].Weight {
			continue
		}
		line := b.weightLine
		if line == 0 {
			line = b.Line
		}
		alg := "algorithm " + np.Algorithm
		_, set := c.lines["algorithm"]
		if np.Name != DefaultPool {
			_, own := np.lines["algorithm"]
			set = set || own
		}
		if !set && c.flags["algorithm"] == "" {
			alg += " (the default)"
		}
		p := c.siteOf(np).backendAt(i, "weight", line)
		p.Msg = fmt.Sprintf("weight %d differs from the first backend's (%d), but %s", b.Weight, np.Backends[0].Weight, ignores(alg))
		return p, true
	}
	return Problem{}, false
}

// hashingUnused warns of hash_key and hash_balance_factor set for a pool
// whose algorithm hashes nothing, where the pool sets them itself: a
// named pool inheriting the top level's says nothing.
func (c *Config) hashingUnused(np NamedPool, opts Options) []Problem {
	if len(opts.Hashing) == 0 || slices.Contains(opts.Hashing, np.Algorithm) {
		return nil
	}
	var ws []Problem
	for _, key := range []string{"hash_key", "hash_balance_factor"} {
		set := false
		if np.Name == DefaultPool {
			_, set = c.lines[key]
		} else {
			_, set = np.lines[key]
		}
		if key == "hash_key" && np.HashKey == DefaultHashKey || key == "hash_balance_factor" && np.HashBalanceFactor == 0 {
			set = false
		}
		if !set {
			continue
		}
		p := c.siteOf(np).at(key)
		p.Msg = fmt.Sprintf("%s is set, but algorithm %s does not hash, so it has no effect; it applies to %s",
			key, np.Algorithm, strings.Join(opts.Hashing, ", "))
		ws = append(ws, p)
	}
	return ws
}
