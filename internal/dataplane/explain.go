package dataplane

import (
	"fmt"
	"io"
	"strings"

	"relay/internal/config"
	"relay/internal/core"
	"relay/internal/logging"
	"relay/internal/ratelimit"
)

// Explain says how cfg routes one request, as relay -explain prints it:
// the normalised path, each route tried and why it matched or not, and
// where the request ends: a pool and the target its backend gets, a
// redirect, 404 or 400. target is a path or an absolute http or https URL
// (whose authority is the Host unless headers give one; https stands for
// a request over TLS). served reports that a pool or a redirect takes the
// request.
func Explain(cfg *config.Config, method, target string, headers [][2]string) (text string, served bool, err error) {
	c := core.New(explainCore(cfg))
	for _, np := range cfg.AllPools() {
		pc := poolConfigOf(np.Name, np.Pool, newStickyKey())
		pc.Features = append(pc.Features, clientCertHeaders(cfg, nil)...)
		if _, err := c.AddPool(pc, nil); err != nil {
			return "", false, err
		}
	}
	r, err := routingOf(cfg, c)
	if err != nil {
		return "", false, err
	}
	var b strings.Builder
	if r.Table == nil {
		if r.Default == nil {
			return "no routes and no default pool: 404\n", false, nil
		}
		fmt.Fprintf(&b, "no routes: pool %s, backend gets %s unchanged\n", DefaultPool, target)
		explainPool(&b, nil, cfg.LookupPool(DefaultPool), DefaultPool)
		explainFeatures(&b, c, r.Default.Features())
		return b.String(), true, nil
	}
	host := ""
	for _, h := range headers {
		if strings.EqualFold(h[0], "host") {
			host = h[1]
		}
	}
	e := r.Table.Explain(method, target, host, headers)
	if e.Err != nil && e.Path == "" {
		fmt.Fprintf(&b, "refused with 400: %v\n", e.Err)
		return b.String(), false, nil
	}
	fmt.Fprintf(&b, "normalised path: %s\n", e.Path)
	for _, s := range e.Steps {
		verdict := "no"
		if s.Matched {
			verdict = "MATCH"
		}
		fmt.Fprintf(&b, "  %-5s %s: %s\n", verdict, s.Name, strings.Join(s.Reasons, "; "))
	}
	switch {
	case e.Err != nil:
		fmt.Fprintf(&b, "refused with 400: %v\n", e.Err)
	case e.Redirect != "":
		fmt.Fprintf(&b, "route %s redirects: %d, Location: %s\n", e.Name, e.RedirectStatus, e.Redirect)
		served = true
	case e.Route >= 0:
		pool := r.Pools[e.Pool].Name()
		fmt.Fprintf(&b, "route %s -> pool %s, backend gets %s\n", e.Name, pool, e.Target)
		explainPool(&b, &cfg.Routes[e.Route], cfg.LookupPool(pool), pool)
		explainFeatures(&b, c, r.Features[e.Route])
		served = true
	case r.Default != nil:
		fmt.Fprintf(&b, "no route matches -> pool %s, backend gets %s\n", DefaultPool, e.Target)
		explainPool(&b, nil, cfg.LookupPool(DefaultPool), DefaultPool)
		explainFeatures(&b, c, r.Default.Features())
		served = true
	default:
		b.WriteString("no route matches and there is no default pool: 404\n")
	}
	return b.String(), served, nil
}

// explainPool says what the pool a request ends in speaks to its
// backends, when that is not HTTP/1.1, and the rate limits it meets.
func explainPool(b *strings.Builder, route *config.Route, pool *config.Pool, poolName string) {
	if pool != nil {
		if pool.Protocol != config.DefaultProtocol {
			fmt.Fprintf(b, "  pool %s speaks %s to its backends\n", poolName, pool.Protocol)
		}
		for _, be := range pool.Backends {
			if proto := pool.BackendProtocol(be); proto != pool.Protocol {
				fmt.Fprintf(b, "  backend %s speaks %s\n", be.URL, proto)
			}
		}
	}
	explainLimits(b, route, pool, poolName)
}

// explainLimits says which rate limits a request taken by route (nil:
// none) to pool meets, in the order they apply.
func explainLimits(b *strings.Builder, route *config.Route, pool *config.Pool, poolName string) {
	if route != nil && route.RateLimit != nil {
		fmt.Fprintf(b, "  rate limit of route %s: %s\n", route.Name, describeLimit(route.RateLimit))
	}
	if pool != nil && pool.RateLimit != nil {
		fmt.Fprintf(b, "  rate limit of pool %s: %s\n", poolName, describeLimit(pool.RateLimit))
	}
}

// describeLimit says what a rate limit allows, by what, and where its
// buckets are.
func describeLimit(r *config.RateLimit) string {
	by := "per client address"
	switch {
	case r.Key == config.RateLimitRoute:
		by = "shared by all its requests"
	case r.Header() != "":
		by = "per value of " + r.Header()
	}
	where := "in relay's memory"
	if r.Store == config.RateLimitRedis {
		where = "in Redis, " + map[ratelimit.Failure]string{ratelimit.FailOpen: "allowing requests", ratelimit.FailClosed: "refusing requests",
			ratelimit.FailLocal: "limiting by relay's own buckets"}[r.OnStoreError] + " while it is unreachable"
	}
	return fmt.Sprintf("%d a second, burst %d, %s, %s", r.Rate, r.Burst, by, where)
}

// explainCore is a core whose own features are those cfg turns on, for
// naming them: its access log and spans go nowhere.
func explainCore(cfg *config.Config) core.Config {
	cc := core.Config{RequestID: cfg.RequestID}
	if cfg.AccessLog {
		cc.AccessLog = logging.NewAccessLog(io.Discard)
	}
	var t *core.Tracing
	if cfg.Tracing != nil {
		t = core.NewTracing(cfg.Tracing.Sampler(), nil)
	}
	var first []core.Feature
	if a := acmeChallenges(cfg, nil); a != nil {
		first = []core.Feature{a}
	}
	cc.Features = func(c *core.Core) []core.Feature { return append(first, core.CoreFeatures(c, t)...) }
	return cc
}

// explainFeatures lists the features a request meets, the core's and
// then own, its route's or pool's, in their order with their phases.
func explainFeatures(b *strings.Builder, c *core.Core, own []core.Feature) {
	chain := core.NewChain(append(c.Features(), own...)...)
	for _, f := range chain.Features() {
		var ps []string
		for _, p := range core.Phases(f) {
			ps = append(ps, p.String())
		}
		fmt.Fprintf(b, "  feature %s: %s\n", f.FeatureName(), strings.Join(ps, ", "))
	}
}
