// Package core is relay's forwarding core: what happens to a request
// between a front door that received it and the backend that answers it,
// whatever protocol the client spoke.
//
// A front door (relay's HTTP/1.1 server in package proxy, its HTTP/2
// server in package h2) turns what arrived into an Exchange: a request view,
// a body and a Responder to answer through. Core.Forward then runs the same
// steps for every front door:
//
//	route   the pool that serves the request: the first route of the
//	        table (routing.go) that matches, else the default pool; the
//	        path is normalised and rewritten, or relay answers itself
//	        (404, a redirect, 400 for a refused path)
//	pick    a backend the pool's algorithm chooses among those that may
//	        be picked (backend.Available) and that the request has not
//	        tried (pick.go)
//	wait    in the pool's queue when every candidate is at its cap
//	        (wait.go)
//	attempt the request over the pool's upstream connections, HTTP/1.1;
//	        judged for the breaker; retried on another backend only when
//	        that is safe and the budget allows (attempt.go)
//	account in-flight and failure counts, the access log
//
// and answers through the Responder: the backend's response, or relay's
// own 502, 503 or 504. The core knows nothing of the client's wire format;
// the upstream side is relay's own HTTP/1.1 engine (package h1). Package
// dataplane builds a core and its pools from the configuration.
package core

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"relay/internal/backend"
	"relay/internal/fds"
	"relay/internal/h1"
	"relay/internal/logging"
	"relay/internal/ratelimit"
	"relay/internal/stats"
)

// Config holds what the core needs besides its pools.
type Config struct {
	// TrustedProxies are the peers whose X-Forwarded-* fields are kept and
	// whose X-Forwarded-For decides the client address for hashing.
	TrustedProxies []netip.Prefix
	// AccessLog receives one entry per request; nil turns access logs off.
	AccessLog *logging.AccessLog
	// RequestID gives every request an id, sent to the backend and back
	// to the client as X-Request-Id (requestid.go).
	RequestID bool
	// Logger receives errors and events; nil discards them.
	Logger *slog.Logger
	// MaxBodyBytes caps a request body; 0 means no cap. A longer
	// Content-Length gets 413 before anything goes upstream; a chunked body
	// that grows past it is cut off (body.go).
	MaxBodyBytes int64
	// HoldBodyBytes is the longest Content-Length whose body is read whole
	// before a backend is picked; 0 holds none but empty ones.
	HoldBodyBytes int64
	// Descriptors is the process's budget of file descriptors, which
	// every upstream connection takes a place in; nil has no bound.
	Descriptors *fds.Budget
	// Instance is relay's instance id, which its Via entry carries
	// (via.go); the same in every process of one relay. "" makes one for
	// this core.
	Instance string
	// NewLimiter makes the buckets of each rate limit of a route or a
	// pool, given a name that tells one limit's buckets from another's
	// (limits of one name share them); nil keeps them in a table in this
	// process's memory.
	NewLimiter func(name string, r RateLimit) ratelimit.Limiter
	// StreamIdleTimeout ends a request to an HTTP/2 backend, once its
	// response head has come, when neither its request body nor its
	// response body has moved for this long (a streaming gRPC call may
	// last as long as it keeps moving); 0 takes a minute.
	StreamIdleTimeout time.Duration
	// Features makes the core's own features, in their order (phase.go),
	// given the core they serve: those of every request, the only ones
	// that act as it arrives, and the first of every route's and pool's
	// chain. nil takes DefaultFeatures.
	Features func(c *Core) []Feature
}

// Core forwards requests to pools of backends. Create it with New and give
// it pools with AddPool; it is safe for concurrent use.
type Core struct {
	cfg          Config
	upstreamBufs *h1.BufferPool // read buffers of upstream connections
	via          via            // relay's Via entries
	ids          *requestIDs    // makes request ids (requestid.go)
	// loopLog and shortLog write the warnings a client can repeat on
	// every request, about loops and about descriptors run out: one of
	// each every rareEvery, the next saying how many were dropped.
	loopLog, shortLog *logging.Limited
	// backendLog writes the warnings HTTP/2 backends' misbehaviour
	// causes (h2up.Options.Warnings): backendLines a second at most.
	backendLog *logging.Limited
	pooled     atomic.Int64 // idle upstream connections, in every pool
	// verifier says which chains of a TLS client's certificate are
	// verified, hostRules which client certificate rule covers a host
	// (clientcert.go); nil when none was set.
	verifier  atomic.Pointer[func(*tls.ConnectionState) [][]*x509.Certificate]
	hostRules atomic.Pointer[hostRules]
	// features is the core's own chain: every request's, and the head
	// of every route's and pool's (Core.chainOf).
	features *Chain

	// routing is the table in front of the pools (routing.go), swapped
	// whole; noPool counts the requests it answered itself (404, 400,
	// redirects).
	routing atomic.Pointer[routing]
	noPool  stats.Requests

	mu    sync.Mutex
	pools map[string]*Pool
	// routeCounts are the requests each route took, by route name,
	// kept across reloads.
	routeCounts map[string]*stats.ByClass
	// table holds rate limits' buckets without Config.NewLimiter, made
	// once (ownTable); limitedCounts are the requests rate limits
	// refused, by pool and route, kept across reloads; and routeLimits
	// the limits of the routes, by name, so a reload that keeps a route's
	// limit keeps its buckets.
	ownTable      sync.Once
	table         *ratelimit.Table
	limitedCounts map[limitedKey]*atomic.Uint64
	routeLimits   map[string]*limit
}

// New returns a core with no pools.
func New(cfg Config) *Core {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Core{cfg: cfg, upstreamBufs: h1.NewBufferPool(upstreamBufSize), via: newVia(cfg.Instance), ids: newRequestIDs(),
		loopLog: logging.NewLimited(cfg.Logger, 1, rareEvery), shortLog: logging.NewLimited(cfg.Logger, 1, rareEvery),
		backendLog: logging.NewLimited(cfg.Logger, backendLines, time.Second),
		pools:      make(map[string]*Pool), routeCounts: make(map[string]*stats.ByClass),
		limitedCounts: make(map[limitedKey]*atomic.Uint64), routeLimits: make(map[string]*limit)}
	mk := cfg.Features
	if mk == nil {
		mk = DefaultFeatures
	}
	c.features = NewChain(mk(c)...)
	c.routing.Store(&routing{})
	if cfg.Descriptors != nil {
		cfg.Descriptors.SetReclaim(c.reclaimIdle)
	}
	return c
}

// DefaultFeatures returns the core's own features without tracing
// (CoreFeatures).
func DefaultFeatures(c *Core) []Feature { return CoreFeatures(c, nil) }

// CoreFeatures returns the core's own features, those of every request, in
// their order: the misdirection check (421, first, so that a request
// it refuses takes no rate limit's token), X-Forwarded-*, the removal of
// a client's fields about client certificates, the loop check (and relay's Via entry), the
// rate limits, request ids when Config.RequestID is set, tracing when t is
// not nil, and the access log when Config.AccessLog is set, last so that
// its line has what the others found.
func CoreFeatures(c *Core, t *Tracing) []Feature {
	fs := []Feature{Misdirection(c), ForwardedFields(c), ClientCertGuard(), LoopCheck(c), RateLimits(c), RequestIDs(c)}
	if t != nil {
		fs = append(fs, t)
	}
	return append(fs, AccessLog(c, t))
}

// LoopCheck is relay's Via entry and the 508 for a request that carries
// it already (via.go).
func LoopCheck(c *Core) Feature { return loopCheck{c} }

// RateLimits applies the route's and the pool's rate limits (ratelimit.go).
func RateLimits(c *Core) Feature { return rateLimits{c} }

// RequestIDs gives requests ids (requestid.go); nil unless
// Config.RequestID is set.
func RequestIDs(c *Core) Feature {
	if !c.cfg.RequestID {
		return nil
	}
	return requestIDFeature{c.ids}
}

// AccessLog writes a line per request (accesslog.go), with the trace id
// when t is not nil; nil unless Config.AccessLog is set.
func AccessLog(c *Core, t *Tracing) Feature {
	if c.cfg.AccessLog == nil {
		return nil
	}
	return &accessLog{log: c.cfg.AccessLog, trace: t}
}

// Features returns the core's own features, in their order.
func (c *Core) Features() []Feature { return c.features.Features() }

// chainOf returns the chain of a route or pool whose own features are fs:
// the core's features, then fs.
func (c *Core) chainOf(fs []Feature) *Chain {
	if len(fs) == 0 {
		return c.features
	}
	return NewChain(append(slices.Clip(c.features.features), fs...)...)
}

// rareEvery spaces the warnings of Core.loopLog and Core.shortLog.
const rareEvery = 10 * time.Second

// backendLines caps the warnings HTTP/2 backends cause each second, as
// the HTTP/2 front door caps those its clients cause.
const backendLines = 10

// AddPool creates the pool pc describes over bs. The first pool added
// serves every request until SetRouting says otherwise.
func (c *Core) AddPool(pc PoolConfig, bs []*backend.Backend) (*Pool, error) {
	p, err := newPool(c, pc)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pools[pc.Name] != nil {
		return nil, fmt.Errorf("pool %q is defined twice", pc.Name)
	}
	c.pools[pc.Name] = p
	if c.routing.Load().Default == nil && c.routing.Load().Table == nil {
		c.routing.Store(&routing{Routing: Routing{Default: p}})
	}
	p.SetBackends(bs)
	return p, nil
}

// RemovePool removes the pool named name, once routing no longer sends to
// it: requests on their way through it finish; its idle upstream
// connections are closed, and so is every one a request gives back. The
// pool keeps its members: a request that took its route just before the
// routing changed may not have picked a backend yet, and must find one.
func (c *Core) RemovePool(name string) {
	c.mu.Lock()
	p := c.pools[name]
	delete(c.pools, name)
	c.mu.Unlock()
	if p != nil {
		p.closeIdle()
	}
}

// Pool returns the pool named name, or nil.
func (c *Core) Pool(name string) *Pool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pools[name]
}

// Stats adds the counters of every pool and its members, as of now, to
// st, pools in name order.
func (c *Core) Stats(st *stats.Process) {
	for _, p := range c.Pools() {
		p.Stats(st)
	}
	c.routeStats(st)
	c.limitedStats(st)
	n := c.noPool.Read()
	st.NoPool.Add(&n)
	for _, f := range c.features.features {
		if t, ok := f.(*Tracing); ok {
			t.stats(st)
		}
	}
	compressionStats(st)
}

// Pools returns the core's pools in name order.
func (c *Core) Pools() []*Pool {
	c.mu.Lock()
	ps := make([]*Pool, 0, len(c.pools))
	for _, p := range c.pools {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	slices.SortFunc(ps, func(a, b *Pool) int { return strings.Compare(a.Name(), b.Name()) })
	return ps
}

// CloseIdle closes every pooled upstream connection of every pool.
func (c *Core) CloseIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pools {
		p.closeIdle()
	}
}

// NewPeer works out what the core needs of a client connection from its
// address; tls says whether the client connected over TLS.
func (c *Core) NewPeer(addr netip.AddrPort, tls bool) Peer {
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	return Peer{Addr: addr, Text: addr.Addr().AppendTo(nil), Trusted: c.trusts(addr.Addr()), TLS: tls}
}

// Descriptors returns the process's budget of file descriptors (nil: no
// bound), which front doors consult before taking on new work.
func (c *Core) Descriptors() *fds.Budget { return c.cfg.Descriptors }

// Forward serves the request in x: it drives it through the phases
// (phase.go), picks backends from its pool and tries the request on them
// until one answers or retrying is no longer safe, answers the client
// through x.Door, and accounts for the request.
func (c *Core) Forward(x *Exchange) Outcome {
	start := time.Now()
	method := stats.MethodIndex(x.Req.Method)
	x.start, x.pool, x.chain = start, nil, c.features
	x.affinity, x.answering = nil, nil
	// The upstream times are measured only for the access log.
	x.timed, x.connect, x.response = c.cfg.AccessLog != nil, -1, -1
	c.features.accepted(x)
	var p *Pool
	o, answered := c.features.answeredFirst(x, start)
	if answered {
		x.routeName, x.routeCount = "", nil
		x.routeLimit, x.limitedCount = nil, nil
	} else {
		var routed bool
		p, o, routed = c.route(x)
		x.pool = p
		if !routed {
			o = c.admit(x, p, start)
		}
	}
	took := time.Since(start)
	if x.routeCount != nil {
		x.routeCount.Observe(o.Status)
	}
	// The backend that answered counts the request; else its pool, as
	// unanswered (relay's own errors, gRPC-shaped ones too); else relay.
	counts := &c.noPool
	switch {
	case o.Backend != nil:
		counts = &o.Backend.Requests
	case p != nil:
		counts = &p.unanswered
	}
	counts.Observe(method, o.Status, took, o.In, o.Out)
	counts.ObserveGRPC(o.GRPCStatus)
	// The request's chain begins with the core's own features.
	x.chain.finished(x, o, took)
	x.rid = x.rid[:0] // no request of this exchange is being forwarded now
	return o
}

// admit runs the admit phase on a routed request and, when it may go
// on, the attempts on p: the features of its chain (the loop check and
// the rate limits among them), then its body, held or refused.
func (c *Core) admit(x *Exchange, p *Pool, start time.Time) Outcome {
	if o, done := x.chain.admitted(x, start); done {
		return o
	}
	if x.Body == nil {
		return p.forward(x, start)
	}
	o, ok := c.admitBody(x)
	if ok {
		// Reading a held body took time: deadlines start now.
		o = p.forward(x, time.Now())
	}
	x.releaseBody()
	return o
}

// LogRejected writes the access log line of a request a front door refused
// before its head could be parsed: method and path are unknown.
func (c *Core) LogRejected(peer *Peer, status int) {
	if c.cfg.AccessLog == nil {
		return
	}
	c.cfg.AccessLog.Log(&logging.Entry{Time: time.Now(), Client: peer.Addr, TLS: peer.TLS, Status: status,
		UpstreamConnect: -1, UpstreamResponse: -1})
}
