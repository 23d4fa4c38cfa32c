package dataplane

import (
	"crypto/rand"
	"fmt"

	"relay/internal/balance"
	"relay/internal/config"
	"relay/internal/core"
	"relay/internal/route"
	"relay/internal/supervisor"
)

// DefaultPool names the pool the file's top level describes.
const DefaultPool = config.DefaultPool

// MembersOf is every pool's membership as the file gives it, pool by pool
// in cfg.AllPools' order: what a data plane starts with, and what the
// control starts from and a reload hands it.
func MembersOf(cfg *config.Config) []supervisor.Member {
	var ms []supervisor.Member
	for _, np := range cfg.AllPools() {
		for _, b := range np.Backends {
			ms = append(ms, supervisor.Member{Pool: np.Name, URL: b.URL.String(), Weight: b.Weight, MaxRequests: b.MaxRequests})
		}
	}
	return ms
}

// poolConfigOf is the one conversion of a pool's section of the
// configuration into the core's settings for it.
//
// stickyKey is the key of sticky cookies when the section sets none.
func poolConfigOf(name string, p *config.Pool, stickyKey []byte) core.PoolConfig {
	// The file's checks refused a hash_key that does not parse.
	hashKey, _ := balance.ParseKeySpec(p.HashKey)
	return core.PoolConfig{
		Features:          poolFeatures(p),
		Name:              name,
		Algorithm:         p.Algorithm,
		Retries:           p.Retries,
		ConnectTimeout:    p.ConnectTimeout,
		ResponseTimeout:   p.ResponseTimeout,
		MaxIdlePerBackend: p.MaxIdleConnsPerBackend,
		IdleTimeout:       p.UpstreamIdleTimeout,

		BreakerFailures:   p.BreakerFailures,
		BreakerStatuses:   p.BreakerStatuses,
		BreakerOpenTime:   p.BreakerOpenTime,
		MaxEjectedPercent: p.MaxEjectedPercent,

		MaxRequests:  p.BackendMaxRequests,
		MaxQueued:    p.MaxQueuedRequests,
		QueueTimeout: p.QueueTimeout,

		RetryBudgetPercent: p.RetryBudgetPercent,
		RetryBudgetFloor:   p.RetryBudgetFloor,

		SlowStart: p.SlowStart,

		Sticky:            stickyOf(p.Sticky, stickyKey),
		RateLimit:         rateLimitOf(p.RateLimit),
		HashKey:           hashKey,
		HashBalanceFactor: p.HashBalanceFactor,

		Protocol:            protocolOf(p.Protocol),
		BackendProtocols:    backendProtocolsOf(p),
		BreakerGRPCStatuses: p.BreakerGRPCStatuses,
		MaxGRPCTimeout:      p.MaxGRPCTimeout,
	}
}

// protocolOf is the core's form of a protocol the file's checks passed.
func protocolOf(s string) core.Protocol {
	p, _ := core.ParseProtocol(s)
	return p
}

// backendProtocolsOf maps the canonical name of each backend of p whose
// protocol is not the pool's (backend.Host.Name, as the members are
// named) to its protocol; nil when every backend speaks the pool's.
func backendProtocolsOf(p *config.Pool) map[string]core.Protocol {
	var m map[string]core.Protocol
	for _, b := range p.Backends {
		if proto := p.BackendProtocol(b); proto != p.Protocol {
			if m == nil {
				m = map[string]core.Protocol{}
			}
			m[canonical(b.URL)] = protocolOf(proto)
		}
	}
	return m
}

// stickyOf is the core's form of a sticky section: its key, or stickyKey
// when it sets none.
func stickyOf(s config.Sticky, stickyKey []byte) core.Sticky {
	if !s.On() {
		return core.Sticky{}
	}
	cs := core.Sticky{Cookie: s.Cookie, Path: s.Path, MaxAge: s.MaxAge, HTTPOnly: s.HTTPOnly, Key: stickyKey,
		Indirect: s.Indirect, NoCache: s.NoCache}
	if s.Key != "" {
		cs.Key = []byte(s.Key)
	}
	switch s.Secure {
	case "true":
		cs.Secure = core.SecureAlways
	case "false":
		cs.Secure = core.SecureNever
	default:
		cs.Secure = core.SecureOnTLS
	}
	cs.SameSite = map[string]string{"lax": "Lax", "strict": "Strict", "none": "None"}[s.SameSite]
	return cs
}

// newStickyKey makes a key for the sticky cookies of a data plane that was
// given none (Options.StickyKey): one process on its own, a tool.
func newStickyKey() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}

// rateLimitOf is the core's form of a rate_limit section; nil for none.
func rateLimitOf(r *config.RateLimit) *core.RateLimit {
	if r == nil {
		return nil
	}
	l := &core.RateLimit{Spec: r.Spec}
	if r.Store == config.RateLimitRedis {
		l.Store, l.Failure = core.StoreRedis, r.OnStoreError
	}
	switch {
	case r.Key == config.RateLimitRoute:
		l.Key = core.RateByRoute
	case r.Header() != "":
		l.Key, l.Header = core.RateByHeader, r.Header()
	default:
		l.Key = core.RateByClient
	}
	return l
}

// routingOf builds the route table cfg describes over the core's pools:
// each route's pool by name, the default pool for what no route takes
// (none when the file's top level has no backends: 404).
func routingOf(cfg *config.Config, c *core.Core) (core.Routing, error) {
	var r core.Routing
	if cfg.HasDefaultPool() {
		r.Default = c.Pool(DefaultPool)
	}
	if len(cfg.Routes) == 0 {
		return r, nil
	}
	index := map[string]int{}
	specs := make([]route.Spec, len(cfg.Routes))
	r.Limits = make([]*core.RateLimit, len(cfg.Routes))
	r.Features = make([][]core.Feature, len(cfg.Routes))
	for i, cr := range cfg.Routes {
		r.Limits[i] = rateLimitOf(cr.RateLimit)
		specs[i] = cr.Spec
		if cr.Redirect != nil {
			continue
		}
		r.Features[i] = routeFeatures(cfg, &cr, cfg.LookupPool(cr.Pool))
		p := c.Pool(cr.Pool)
		if p == nil {
			return r, fmt.Errorf("route %q: pool %q does not exist", cr.Name, cr.Pool)
		}
		j, ok := index[cr.Pool]
		if !ok {
			j = len(r.Pools)
			index[cr.Pool] = j
			r.Pools = append(r.Pools, p)
		}
		specs[i].Target = j
	}
	t, err := route.New(specs, cfg.EscapedSlashesMode())
	if err != nil {
		return r, err
	}
	r.Table = t
	return r, nil
}
