package dataplane

import (
	"slices"

	"relay/internal/compress"
	"relay/internal/config"
	"relay/internal/core"
)

// The features of the request path (core/phase.go) are decided here, for
// the core and for each route and pool: the file says which are on. The
// core's own come in an order fixed by core.CoreFeatures; a route's and a
// pool's are listed, in their order, by this file alone.

// coreFeatures makes the core's own features, those of every request:
// the answers to ACME's HTTP-01 challenges when the acme section asks
// for them, then core.CoreFeatures, with tracing when the file turns it
// on.
func (pl *Plane) coreFeatures(cfg *config.Config) func(c *core.Core) []core.Feature {
	var first []core.Feature
	if pl.acme = acmeChallenges(cfg, pl.opts.HTTP01); pl.acme != nil {
		first = []core.Feature{pl.acme}
	}
	return func(c *core.Core) []core.Feature {
		return append(first, core.CoreFeatures(c, pl.tracing)...)
	}
}

// acmeChallenges is the feature answering HTTP-01 challenges for the
// acme section's names from answers, before routing; nil without an
// acme section or when its challenges leave http-01 out (both restart
// settings). It is the core's own, so a route (a redirect to https, say)
// cannot shadow it. It is there with no names too, for a reload that
// adds some (acmeNames).
func acmeChallenges(cfg *config.Config, answers core.HTTP01Answers) *core.ACMEChallenges {
	a := cfg.ACME
	if a == nil || !slices.Contains(a.Challenges, "http-01") {
		return nil
	}
	return core.NewACMEChallenges(a.Domains, answers)
}

// acmeNames gives the HTTP-01 answerer the names of cfg's acme.domains,
// which a reload applies.
func (pl *Plane) acmeNames(cfg *config.Config) {
	if pl.acme != nil && cfg.ACME != nil {
		pl.acme.SetNames(cfg.ACME.Domains)
	}
}

// poolFeatures are the features of the requests no route sends to pool
// p: compression, then the sticky cookie.
func poolFeatures(p *config.Pool) []core.Feature {
	return append(compression(p.Compress), stickyCookies(p)...)
}

// routeFeatures are the features of the requests route r takes to pool
// p: compression by the route's compress section, else its pool's; the
// pool's sticky cookie; what the backend is told of a client certificate
// (the route's client_cert_headers, else the top level's); then the
// route's header changes, last so that what a route sets is what the
// backend or the client gets.
func routeFeatures(cfg *config.Config, r *config.Route, p *config.Pool) []core.Feature {
	c := r.Compress
	if c == nil && p != nil {
		c = p.Compress
	}
	fs := compression(c)
	if p != nil {
		fs = append(fs, stickyCookies(p)...)
	}
	fs = append(fs, clientCertHeaders(cfg, r)...)
	if h := core.NewHeaderChanges(r.RequestHeaders, r.ResponseHeaders); h != nil {
		fs = append(fs, h)
	}
	return fs
}

// clientCertHeaders is the feature telling backends of a client's
// verified certificate, for route r (nil: the requests no route takes);
// none when client_cert_headers is none there. Removing the fields a
// client sent under those names is the core's own (core.ClientCertGuard),
// on every request.
func clientCertHeaders(cfg *config.Config, r *config.Route) []core.Feature {
	if h := core.NewClientCertHeaders(cfg.ClientCertHeadersOf(r)); h != nil {
		return []core.Feature{h}
	}
	return nil
}

// hostRules are the TLS listener's client certificate rules by host, for
// the core's misdirection check (421); nil when every host has the same
// rule, so that no request is misdirected.
func hostRules(cfg *config.Config) core.HostRules {
	if h := config.NewClientAuthHosts(cfg.ClientAuth); h.Differ {
		return h
	}
	return nil
}

// stickyCookies is the sticky cookie feature of pool p, none when its
// sticky sessions are off. The pool's own side, the members the values
// name, comes from the same section (poolConfigOf).
func stickyCookies(p *config.Pool) []core.Feature {
	if s := core.NewStickyCookies(stickyOf(p.Sticky, nil)); s != nil {
		return []core.Feature{s}
	}
	return nil
}

// compression is the compress feature of section c; none for nil. The
// file's checks refused a section New would refuse.
func compression(c *compress.Config) []core.Feature {
	if c == nil {
		return nil
	}
	p, err := compress.New(*c)
	if err != nil {
		return nil
	}
	return []core.Feature{core.NewCompression(p)}
}
