package dataplane

import (
	"relay/internal/compress"
	"relay/internal/config"
	"relay/internal/core"
)

// The features of the request path (core/phase.go) and their order are
// decided here, for the core and for each route and pool: the file says
// which are on, and this is the one place that lists them.

// coreFeatures makes the core's own features, those of every request, in
// their order: the loop check (and relay's Via entry), the rate limits,
// request ids, tracing, the access log (last, so that its line has what
// the others found).
func (pl *Plane) coreFeatures(c *core.Core) []core.Feature {
	var fs []core.Feature
	fs = append(fs, core.LoopCheck(c), core.RateLimits(c), core.RequestIDs(c))
	if pl.tracing != nil {
		fs = append(fs, pl.tracing)
	}
	return append(fs, core.AccessLog(c, pl.tracing))
}

// poolFeatures are the features of the requests no route sends to pool p.
func poolFeatures(p *config.Pool) []core.Feature {
	return compression(p.Compress)
}

// routeFeatures are the features of the requests route r takes to pool
// p: the route's compress section, else its pool's.
func routeFeatures(r *config.Route, p *config.Pool) []core.Feature {
	c := r.Compress
	if c == nil && p != nil {
		c = p.Compress
	}
	return compression(c)
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
