// Package dataplane builds relay's data plane in a serving process from
// its configuration: the forwarding core and its named pools. It is the one
// place that maps the configuration's pool sections to the core's settings,
// applies membership (from the file, the admin API and etcd, through the
// control) pool by pool with this process's share of every request cap,
// and takes reloads. The front doors (packages proxy and h2) take its core
// and build nothing; cmd/relay only wires it to the control and the doors.
package dataplane

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"relay/internal/backend"
	"relay/internal/compress"
	"relay/internal/config"
	"relay/internal/core"
	"relay/internal/fds"
	"relay/internal/logging"
	"relay/internal/ratelimit"
	"relay/internal/stats"
	"relay/internal/supervisor"
	"relay/internal/trace"
)

// Options are what a data plane needs besides the configuration: the
// process it serves in and the hooks that tie it to the control.
// NewForProcess sets Share, Instance, StickyKey and RateTable from the
// serving process.
type Options struct {
	// Share turns a relay-wide cap on requests in flight into this
	// process's part of it; nil keeps caps whole (one process).
	Share func(int) int
	// Breakers gives each pool the hook that learns of its breakers
	// opening and closing, so that the control decides for every process
	// (core.PoolConfig.OnBreaker); nil: pools decide alone.
	Breakers func(pool string) core.BreakerHook
	// AccessLog receives one entry per request; nil turns access logs off.
	AccessLog *logging.AccessLog
	// Logger receives errors and events; nil discards them.
	Logger *slog.Logger
	// Descriptors is the process's budget of file descriptors; nil has
	// no bound.
	Descriptors *fds.Budget
	// Instance is relay's instance id (core.Config.Instance).
	Instance string
	// StickyKey is the key of the sticky cookies of pools whose sticky
	// section sets none: the control's, the same in every process and
	// across reloads (supervisor.ConfigSource.StickyKey). Empty: the
	// plane makes one, which its reloads keep.
	StickyKey []byte
	// RateTable holds the buckets of rate limits kept in memory: with
	// several processes a table they all map, so a limit holds for relay
	// as a whole. nil: the core keeps a table of its own.
	RateTable *ratelimit.Table
	// HTTP01 answers the ACME HTTP-01 challenges of the names the acme
	// section orders (acme.Serving); nil answers none.
	HTTP01 core.HTTP01Answers
}

// newLimiter makes the buckets of a rate limit (core.Config.NewLimiter):
// in Redis for store: redis, else in the table the processes share, which
// also holds a Redis limit's own buckets for on_store_error: local.
func (pl *Plane) newLimiter(name string, r core.RateLimit) ratelimit.Limiter {
	pl.ownTable.Do(func() {
		if pl.opts.RateTable == nil {
			pl.opts.RateTable = ratelimit.NewTable(0) // made when a limit needs it
		}
	})
	local := pl.opts.RateTable.Limit(name, r.Spec)
	if r.Store != core.StoreRedis {
		return local
	}
	switch {
	case pl.redis == nil:
		// The redis section is read at start: a reload that adds it
		// is named in the reload's log line as waiting for a restart.
		pl.noRedis.Do(func() {
			pl.opts.Logger.Warn("a rate limit with store: redis counts in relay's memory until relay restarts with a redis section")
		})
		return local
	case r.Failure == ratelimit.FailLocal:
		return pl.redis.LimitLocal(name, r.Spec, local)
	}
	return pl.redis.Limit(name, r.Spec, r.Failure)
}

// Plane is a serving process's data plane: the core, its pools, and the
// addresses their members share. It is safe for concurrent use.
type Plane struct {
	core *core.Core
	opts Options

	ownTable sync.Once // makes opts.RateTable when it is nil
	// redis keeps the buckets of limits with store: redis, made at start
	// from the redis section; nil without one. noRedis warns once of
	// such a limit without it.
	redis   *ratelimit.Redis
	noRedis sync.Once

	mu sync.Mutex // serialises membership changes and reloads
	// hosts are the addresses the pools' members stand on, by name: one
	// address in two pools is one Host, with one breaker.
	hosts map[string]*backend.Host
	up    *Upstreams // the TLS settings of https backends
	// tracing is the core's tracing feature and exporter its spans'
	// way out, both nil when tracing is off (features.go).
	tracing  *core.Tracing
	exporter *trace.Exporter
	// compressMB is the compress_memory_mb the plane last applied.
	compressMB int
	// acme answers ACME's HTTP-01 challenges, nil when the acme section
	// leaves http-01 out (features.go).
	acme *core.ACMEChallenges
}

// New builds the data plane cfg describes: the core and a pool for every
// pool section, each holding the members the file gives it.
func New(cfg *config.Config, opts Options) (*Plane, error) {
	if opts.Share == nil {
		opts.Share = func(n int) int { return n }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if len(opts.StickyKey) == 0 {
		opts.StickyKey = newStickyKey()
	}
	pl := &Plane{opts: opts, hosts: make(map[string]*backend.Host), up: NewUpstreams(cfg, opts.Logger)}
	if r := cfg.Redis; r != nil {
		pl.redis = ratelimit.NewRedis(ratelimit.RedisOptions{Address: r.Address, Username: r.Username, Password: r.Password,
			DB: r.DB, Timeout: r.Timeout, Prefix: r.Prefix, Logger: opts.Logger})
	}
	if t := cfg.Tracing; t != nil {
		exp, err := trace.NewExporter(t.ExporterSettings(), opts.Logger)
		if err != nil {
			pl.Close()
			return nil, fmt.Errorf("tracing: %w", err)
		}
		pl.exporter, pl.tracing = exp, core.NewTracing(t.Sampler(), exp)
	}
	pl.encoderMemory(cfg)
	pl.core = core.New(pl.coreConfig(cfg))
	for _, np := range cfg.AllPools() {
		if _, err := pl.core.AddPool(pl.poolConfig(cfg, np), nil); err != nil {
			pl.Close()
			return nil, err
		}
	}
	if err := pl.setMembers(MembersOf(cfg)); err != nil {
		pl.Close()
		return nil, err
	}
	r, err := routingOf(cfg, pl.core)
	if err != nil {
		pl.Close()
		return nil, err
	}
	pl.core.SetRouting(r)
	pl.core.SetHostRules(hostRules(cfg))
	return pl, nil
}

// coreConfig is the core's settings under cfg, with the plane's options
// and hooks.
func (pl *Plane) coreConfig(cfg *config.Config) core.Config {
	opts := pl.opts
	return core.Config{
		TrustedProxies: cfg.TrustedProxies, AccessLog: opts.AccessLog, RequestID: cfg.RequestID,
		Logger: opts.Logger, MaxBodyBytes: cfg.MaxBodyBytes, HoldBodyBytes: cfg.BodyBufferBytes,
		Descriptors: opts.Descriptors, Instance: opts.Instance,
		NewLimiter: pl.newLimiter,
		// A stream to an HTTP/2 backend in which nothing moves is idle
		// as a client's keep-alive connection is.
		StreamIdleTimeout: cfg.IdleTimeout,
		Features:          pl.coreFeatures(cfg),
	}
}

// encoderMemory applies compress_memory_mb, the process's budget for the
// compression encoders in use (compress.SetEncoderMemory), when it is set
// or a reload changes it; a file that never sets it leaves the budget as
// it is, compress's default.
func (pl *Plane) encoderMemory(cfg *config.Config) {
	if cfg.CompressMemoryMB == pl.compressMB {
		return
	}
	pl.compressMB = cfg.CompressMemoryMB
	compress.SetEncoderMemory(int64(cfg.CompressMemoryMB) << 20)
}

// Close stops what the plane runs besides the core: the Redis store's
// connections and goroutines.
func (pl *Plane) Close() {
	if pl.redis != nil {
		pl.redis.Close()
	}
	if pl.exporter != nil {
		// The spans still queued go out within a few seconds, or not.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pl.exporter.Close(ctx)
		cancel()
	}
}

// Exporter returns the exporter of the plane's spans, nil when tracing
// is off.
func (pl *Plane) Exporter() *trace.Exporter { return pl.exporter }

// Core returns the forwarding core the front doors hand requests to.
func (pl *Plane) Core() *core.Core { return pl.core }

// poolConfig is the core's settings for the pool section np of cfg, with
// this process's share of its request cap, the data plane's hooks and
// the top level's client_cert_headers.
func (pl *Plane) poolConfig(cfg *config.Config, np config.NamedPool) core.PoolConfig {
	pc := poolConfigOf(np.Name, np.Pool, pl.opts.StickyKey)
	pc.Features = append(pc.Features, clientCertHeaders(cfg, nil)...)
	pc.MaxRequests = pl.opts.Share(pc.MaxRequests)
	if pl.opts.Breakers != nil {
		pc.OnBreaker = pl.opts.Breakers(np.Name)
	}
	return pc
}

// Reconfigure applies a reloaded configuration while the pools serve: a
// pool that stays takes its new settings (requests in flight finish as
// they started), a new pool starts with the backends the file gives it
// (the control's membership, which follows the reload, then takes over:
// a route to a new pool must not answer 503 in between), the routes are
// swapped whole, and a pool the file no longer has is removed once no
// route sends to it. Nothing changes when a pool's settings or the routes
// are refused.
func (pl *Plane) Reconfigure(cfg *config.Config) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	keep := map[string]bool{}
	var added []string
	for _, np := range cfg.AllPools() {
		keep[np.Name] = true
		if pl.core.Pool(np.Name) != nil {
			continue
		}
		bs, err := pl.fileBackends(np)
		if err == nil {
			_, err = pl.core.AddPool(pl.poolConfig(cfg, np), bs)
		}
		if err != nil {
			pl.removeAll(added)
			return err
		}
		added = append(added, np.Name)
	}
	r, err := routingOf(cfg, pl.core)
	if err != nil {
		pl.removeAll(added)
		return err
	}
	for _, np := range cfg.AllPools() {
		if err := pl.core.Pool(np.Name).Check(pl.poolConfig(cfg, np)); err != nil {
			pl.removeAll(added)
			return err
		}
	}
	for _, np := range cfg.AllPools() {
		if err := pl.core.Pool(np.Name).Reconfigure(pl.poolConfig(cfg, np)); err != nil {
			return err // checked above: cannot happen
		}
	}
	pl.core.SetRouting(r)
	pl.core.SetHostRules(hostRules(cfg))
	pl.encoderMemory(cfg)
	pl.acmeNames(cfg)
	for _, p := range pl.core.Pools() {
		if !keep[p.Name()] {
			pl.core.RemovePool(p.Name())
		}
	}
	// Backends' TLS files are read again under the new configuration
	// as the control's membership reaches them.
	pl.up.Reload(cfg)
	return nil
}

// fileBackends are the backends the file gives the pool np, on the
// addresses the pools already share, each with this process's share of
// its request cap, for a pool a reload adds.
func (pl *Plane) fileBackends(np config.NamedPool) ([]*backend.Backend, error) {
	var bs []*backend.Backend
	for _, cb := range np.Backends {
		h := pl.hosts[canonical(cb.URL)]
		if h == nil {
			var err error
			if h, err = backend.NewHost(cb.URL); err != nil {
				return nil, fmt.Errorf("pool %q: %w", np.Name, err)
			}
			pl.hosts[h.Name] = h
		}
		b, err := h.Member(np.Name, cb.Weight)
		if err != nil {
			return nil, fmt.Errorf("pool %q: %w", np.Name, err)
		}
		b.SetMaxRequests(pl.opts.Share(cb.MaxRequests))
		if err := pl.up.Prepare(b); err != nil {
			pl.opts.Logger.Error("backend TLS settings could not be loaded; using Go's defaults until the next membership", "pool", np.Name, "backend", b.Name, "err", err)
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// removeAll removes the pools a refused reload added.
func (pl *Plane) removeAll(names []string) {
	for _, n := range names {
		pl.core.RemovePool(n)
	}
}

// SetMembers makes ms the members of every pool, as the control's
// membership message carries them, and returns the backend of each
// member, in order. A backend that stays keeps its state and
// connections; its weight and its share of its request cap change in
// place. A member of a pool this process does not know is logged and left
// out (nil in its place). When a member's URL is not a valid backend,
// nothing changes, the error says which, and the backends returned are
// the current ones of the members that have one.
func (pl *Plane) SetMembers(ms []supervisor.Member) ([]*backend.Backend, error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	bs, err := pl.setMembersLocked(ms)
	if err != nil {
		return pl.currentLocked(ms), err
	}
	return bs, nil
}

// currentLocked returns the backend each member of ms has now, nil for
// those that have none.
func (pl *Plane) currentLocked(ms []supervisor.Member) []*backend.Backend {
	out := make([]*backend.Backend, len(ms))
	for i, m := range ms {
		if p := pl.core.Pool(m.Pool); p != nil {
			for _, b := range p.Backends() {
				if b.Name == m.URL {
					out[i] = b
				}
			}
		}
	}
	return out
}

func (pl *Plane) setMembers(ms []supervisor.Member) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	_, err := pl.setMembersLocked(ms)
	return err
}

func (pl *Plane) setMembersLocked(ms []supervisor.Member) ([]*backend.Backend, error) {
	// The members each pool has now, by name, to keep what stays.
	cur := make(map[string]map[string]*backend.Backend)
	for _, p := range pl.core.Pools() {
		byName := make(map[string]*backend.Backend)
		for _, b := range p.Backends() {
			byName[b.Name] = b
		}
		cur[p.Name()] = byName
	}
	hosts := make(map[string]*backend.Host, len(ms))
	out := make([]*backend.Backend, len(ms))
	next := make(map[string][]*backend.Backend, len(cur))
	for i, m := range ms {
		if cur[m.Pool] == nil {
			pl.opts.Logger.Error("membership names a pool this process does not have; member left out", "pool", m.Pool, "backend", m.URL)
			continue
		}
		u, err := url.Parse(m.URL)
		if err != nil {
			return nil, fmt.Errorf("pool %q: backend %q: %w", m.Pool, m.URL, err)
		}
		h := hosts[canonical(u)]
		if h == nil {
			if h = pl.hosts[canonical(u)]; h == nil {
				if h, err = backend.NewHost(u); err != nil {
					return nil, fmt.Errorf("pool %q: %w", m.Pool, err)
				}
			}
			hosts[h.Name] = h
		}
		b := cur[m.Pool][h.Name]
		if b == nil || b.Host != h {
			if b, err = h.Member(m.Pool, m.Weight); err != nil {
				return nil, fmt.Errorf("pool %q: %w", m.Pool, err)
			}
		}
		out[i] = b
		next[m.Pool] = append(next[m.Pool], b)
	}
	for i, b := range out {
		if b == nil {
			continue
		}
		b.SetMembership(ms[i].Weight, pl.opts.Share(ms[i].MaxRequests))
		if err := pl.up.Prepare(b); err != nil {
			// The control loaded the same files a moment ago; keep what
			// the backend had (Go's defaults when it is new).
			pl.opts.Logger.Error("backend TLS settings could not be loaded; keeping its current ones", "pool", ms[i].Pool, "backend", b.Name, "err", err)
		}
	}
	for name := range cur {
		pl.core.Pool(name).SetBackends(next[name])
	}
	pl.hosts = hosts
	return out, nil
}

// canonical is the name backend.NewHost gives the address u names.
func canonical(u *url.URL) string { return u.Scheme + "://" + u.Host }

// Backends returns the members of every pool, pools in name order.
func (pl *Plane) Backends() []*backend.Backend {
	var bs []*backend.Backend
	for _, p := range pl.core.Pools() {
		bs = append(bs, p.Backends()...)
	}
	return bs
}

// Available counts the members of every pool that may be picked now.
func (pl *Plane) Available() int {
	n := 0
	for _, p := range pl.core.Pools() {
		n += len(p.Available())
	}
	return n
}

// Stats adds the counters of every pool and its members to st.
func (pl *Plane) Stats(st *stats.Process) { pl.core.Stats(st) }
