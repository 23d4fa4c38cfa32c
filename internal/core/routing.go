package core

import (
	"sync/atomic"

	"relay/internal/h1"
	"relay/internal/route"
	"relay/internal/stats"
)

// Routing is the table in front of the pools: which pool serves a
// request, and what changes on its way. A core without routes sends every
// request to its default pool and touches no target.
type Routing struct {
	// Table matches requests to routes; nil or empty: no routes.
	Table *route.Table
	// Pools are the pools routes send to, by route.Spec.Target.
	Pools []*Pool
	// Default serves what no route takes; nil answers 404.
	Default *Pool
	// Limits are the routes' rate limits, by route index; a missing or
	// nil entry: none.
	Limits []*RateLimit
	// Features are the routes' features in their order (phase.go), by
	// route index; a missing or nil entry: none. A route's chain is the
	// core's features, then these: the pool's own (PoolConfig.Features)
	// serve only the requests no route sends, so the data plane puts in
	// a route's list what its pool contributes. A route's header changes
	// (its spec's RequestHeaders and ResponseHeaders) are one of them,
	// NewHeaderChanges: the core does not read them from the table.
	Features [][]Feature
}

// routing is a Routing as requests read it: the table with what each
// route's requests need of the core ready.
type routing struct {
	Routing
	counts  []*stats.ByClass // by route index: the core's counter of each route's name
	limits  []*limit         // by route index: the route's rate limit, nil when none
	limited []*atomic.Uint64 // by route index: the core's counter of its pool and name
	chains  []*Chain         // by route index: the core's features, then the route's
}

// SetRouting makes r the core's routing from the next request on;
// requests being forwarded finish with the routing they started with.
func (c *Core) SetRouting(r Routing) {
	rt := &routing{Routing: r}
	if r.Table != nil && r.Table.Len() == 0 {
		rt.Table = nil
	}
	if rt.Table != nil {
		c.mu.Lock()
		for i := range rt.Table.Len() {
			s := rt.Table.Spec(i)
			n := c.routeCounts[s.Name]
			if n == nil {
				n = new(stats.ByClass)
				c.routeCounts[s.Name] = n
			}
			rt.counts = append(rt.counts, n)
			var rl *RateLimit
			if i < len(r.Limits) {
				rl = r.Limits[i]
			}
			l := c.keepLimit(c.routeLimits[s.Name], rl, "route:"+s.Name)
			c.routeLimits[s.Name] = l
			rt.limits = append(rt.limits, l)
			var lc *atomic.Uint64
			if s.Redirect == nil {
				lc = c.limitedCounterLocked(r.Pools[s.Target].Name(), s.Name)
			}
			rt.limited = append(rt.limited, lc)
			var fs []Feature
			if i < len(r.Features) {
				fs = r.Features[i]
			}
			rt.chains = append(rt.chains, c.chainOf(fs))
		}
		c.mu.Unlock()
	}
	c.routing.Store(rt)
}

// route finds the pool that serves x. With routes, it matches x against
// the table, gives x the target the backend gets (normalised, rewritten)
// and the route's chain of features; a request that must not go to any pool
// (a path refused, a redirect, no route and no default pool) is answered
// here, and then the pool is nil and done reports the outcome.
func (c *Core) route(x *Exchange) (p *Pool, o Outcome, done bool) {
	rt := c.routing.Load()
	x.routeName, x.routeCount = "", nil
	x.routeLimit, x.limitedCount = nil, nil
	if rt.Table == nil {
		if rt.Default == nil {
			return nil, c.unrouted(x, 404, "no route for this request"), true
		}
		x.chain = rt.Default.cfg().chain
		return rt.Default, o, false
	}
	x.match.Secure = x.Peer.TLS
	ok, err := rt.Table.Match(x.Req, &x.match)
	if err != nil {
		return nil, c.unrouted(x, 400, "request path refused: "+err.Error()), true
	}
	if !ok {
		if rt.Default == nil {
			return nil, c.unrouted(x, 404, "no route for this request"), true
		}
		x.Req.Target = x.match.Target()
		x.chain = rt.Default.cfg().chain
		return rt.Default, o, false
	}
	i := x.match.Route
	spec := rt.Table.Spec(i)
	x.routeName, x.routeCount = spec.Name, rt.counts[i]
	if spec.Redirect != nil {
		return nil, c.redirect(x, rt.Table), true
	}
	x.Req.Target = x.match.Target()
	x.routeLimit, x.limitedCount = rt.limits[i], rt.limited[i]
	x.chain = rt.chains[i]
	return rt.Pools[spec.Target], o, false
}

// unrouted answers a request no pool serves with relay's own error.
func (c *Core) unrouted(x *Exchange, status int, msg string) Outcome {
	return x.answerError(status, msg, false)
}

// redirect answers x with its route's redirect.
func (c *Core) redirect(x *Exchange, t *route.Table) Outcome {
	scheme := "http"
	if x.Peer.TLS {
		scheme = "https"
	}
	status, loc, _, err := t.Redirect(&x.match, x.Req, scheme)
	if err != nil {
		return c.unrouted(x, 400, "redirect needs a Host, and the request has none")
	}
	resp := &x.resp
	resp.Minor, resp.Status, resp.Reason = 1, status, nil
	resp.Fields = append(resp.Fields[:0], h1.Field{Name: locationField, Value: loc})
	resp.Body, resp.ContentLength, resp.Close = h1.BodyNone, 0, false
	if len(x.rid) > 0 {
		x.answerWithID(resp)
	}
	x.respBody.empty()
	n, _, _ := x.Door.Respond(resp, &x.respBody)
	return Outcome{Status: status, Out: n}
}

var locationField = []byte("Location")

// answerText answers x with relay's own status and a fixed plain-text
// body, the request id's field with it (a HEAD request gets the head
// alone). body must stay as it is until the door has sent it.
func (x *Exchange) answerText(status int, body []byte) Outcome {
	resp := &x.resp
	resp.Minor, resp.Status, resp.Reason = 1, status, nil
	resp.Fields = append(resp.Fields[:0], h1.Field{Name: contentTypeField, Value: textPlain})
	resp.Body, resp.ContentLength, resp.Close = h1.BodyLength, int64(len(body)), false
	if len(x.rid) > 0 {
		x.answerWithID(resp)
	}
	if x.Req.IsMethod("HEAD") {
		resp.Body = h1.BodyNone
		x.respBody.empty()
	} else {
		x.respBody.whole(body)
	}
	n, _, _ := x.Door.Respond(resp, &x.respBody)
	return Outcome{Status: status, Out: n}
}

var textPlain = []byte("text/plain")

// routeStats adds the count of every route the core has run to st.
func (c *Core) routeStats(st *stats.Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, n := range c.routeCounts {
		st.Routes = append(st.Routes, stats.Route{Name: name, Responses: n.Read()})
	}
}
