package dataplane

import (
	"relay/internal/config"
	"relay/internal/core"
)

// DefaultPool names the pool the file's top level describes.
const DefaultPool = "default"

// poolSection is one pool of the configuration, named.
type poolSection struct {
	name string
	cfg  *config.Config
}

// poolsOf lists the configuration's pools.
func poolsOf(cfg *config.Config) []poolSection {
	return []poolSection{{name: DefaultPool, cfg: cfg}}
}

// membersOf is every pool's membership as the file gives it.
func membersOf(cfg *config.Config) []Member {
	ms := make([]Member, 0, len(cfg.Backends))
	for _, b := range cfg.Backends {
		ms = append(ms, Member{Pool: DefaultPool, URL: b.URL.String(), Weight: b.Weight, MaxRequests: b.MaxRequests})
	}
	return ms
}

// poolConfigOf is the one conversion of a pool's section of the
// configuration into the core's settings for it.
func poolConfigOf(ps poolSection) core.PoolConfig {
	c := ps.cfg
	return core.PoolConfig{
		Name:              ps.name,
		Algorithm:         c.Algorithm,
		Retries:           c.Retries,
		ConnectTimeout:    c.ConnectTimeout,
		ResponseTimeout:   c.ResponseTimeout,
		MaxIdlePerBackend: c.MaxIdleConnsPerBackend,
		IdleTimeout:       c.UpstreamIdleTimeout,

		BreakerFailures:   c.BreakerFailures,
		BreakerStatuses:   c.BreakerStatuses,
		BreakerOpenTime:   c.BreakerOpenTime,
		MaxEjectedPercent: c.MaxEjectedPercent,

		MaxRequests:  c.BackendMaxRequests,
		MaxQueued:    c.MaxQueuedRequests,
		QueueTimeout: c.QueueTimeout,

		RetryBudgetPercent: c.RetryBudgetPercent,
		RetryBudgetFloor:   c.RetryBudgetFloor,

		SlowStart: c.SlowStart,
	}
}
