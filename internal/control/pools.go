package control

import (
	"fmt"

	"relay/internal/health"
)

// DefaultPool names the pool of the configuration file's top level.
const DefaultPool = "default"

// PoolRules are what the control needs of one pool's settings, as plain
// values: the command fills them from the configuration (the control does
// not read configuration types), one per pool, at start and at every
// reload.
type PoolRules struct {
	// Name names the pool; never "".
	Name string
	// Algorithm is the pool's balancing algorithm, for what the admin
	// API shows.
	Algorithm string
	// MaxEjectedPercent bounds the members breakers may hold out, in
	// percent of the pool's members.
	MaxEjectedPercent int
	// Check is how the pool's members are checked. Pools with the same
	// Check share one check of an address and its verdict; a pool with
	// another (a different path, say) has its own.
	Check health.Config
}

// checkPools reports pools that have no name or share one.
func (l *Control) checkPools(pools []PoolRules) error {
	seen := map[string]bool{}
	for i, p := range pools {
		if p.Name == "" {
			return fmt.Errorf("%w: pool %d has no name", ErrInvalid, i)
		}
		if seen[p.Name] {
			return fmt.Errorf("%w: pool %q is given twice", ErrInvalid, p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// rulesLocked returns pool's rules, the zero value with its name when it
// is not known; l.mu is held.
func (l *Control) rulesLocked(pool string) PoolRules {
	for _, p := range l.pools {
		if p.Name == pool {
			return p
		}
	}
	return PoolRules{Name: pool}
}

// knownLocked reports whether pool is one of relay's; l.mu is held.
func (l *Control) knownLocked(pool string) bool {
	for _, p := range l.pools {
		if p.Name == pool {
			return true
		}
	}
	return false
}

// poolIndexLocked orders members by their pool's place; l.mu is held.
func (l *Control) poolIndexLocked() map[string]int {
	at := make(map[string]int, len(l.pools))
	for i, p := range l.pools {
		at[p.Name] = i
	}
	return at
}
