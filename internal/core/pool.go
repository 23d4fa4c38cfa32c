package core

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"relay/internal/backend"
	"relay/internal/balance"
	"relay/internal/stats"
)

// MaxRetries is the most retries a pool may ask for: a request is tried on
// at most balance.MaxAttempts backends, the first try included.
const MaxRetries = balance.MaxAttempts - 1

// BreakerHook learns of a breaker opening (until is when it ends) or
// closing (until is zero), with the reason.
type BreakerHook func(b *backend.Backend, until time.Time, reason string)

// PoolConfig describes a pool: its name, how it picks, and how it talks
// to its backends. Every field must be set (package proxy fills them from
// relay's configuration, whose defaults are the only ones), except the
// hooks Rand and Dial.
type PoolConfig struct {
	// Name identifies the pool in routes, logs and metrics.
	Name string
	// Algorithm is a balance registry name.
	Algorithm string
	// Rand, when set, is the randomness pickers use (tests inject it).
	Rand func(n int) int
	// Retries is how many other backends a failed request may be tried
	// on when that is safe, 0 to MaxRetries.
	Retries int
	// ConnectTimeout bounds dialing a backend.
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait for a backend's response head, and
	// any single wait for response body bytes.
	ResponseTimeout time.Duration
	// MaxIdlePerBackend caps pooled idle connections per backend; 0 keeps
	// none.
	MaxIdlePerBackend int
	// IdleTimeout is how long an upstream connection may sit idle in the
	// pool before relay closes it.
	IdleTimeout time.Duration
	// Dial, when set, opens upstream connections instead of net.Dialer;
	// benchmarks use it for in-memory backends.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// Circuit breakers (breaker.go). BreakerFailures failed requests in a
	// row open a backend's breaker, 0 turns breakers off; BreakerStatuses
	// are the response statuses that count as failures; BreakerOpenTime
	// is how long a breaker first stays open; MaxEjectedPercent (0..100)
	// bounds the share of members breakers hold out at once.
	BreakerFailures   int
	BreakerStatuses   []int
	BreakerOpenTime   time.Duration
	MaxEjectedPercent int
	// OnBreaker, when set, learns of every breaker opening (until is when
	// it ends) and closing (until is zero), with the reason, so that other
	// serving processes eject and restore the backend too. Whoever it
	// reports to logs the change; the pool logs it at debug level.
	OnBreaker BreakerHook

	// Limits (queue.go). MaxRequests caps the requests in flight to each
	// backend whose own MaxRequests is 0; 0 leaves them uncapped. A request
	// that finds every backend it may go to at its cap waits in a queue of
	// at most MaxQueued requests for up to QueueTimeout.
	MaxRequests  int
	MaxQueued    int
	QueueTimeout time.Duration

	// Retry budget (budget.go): retries stay within RetryBudgetPercent
	// (0..100, 0 turns the budget off) of recent requests, plus
	// RetryBudgetFloor retries a second.
	RetryBudgetPercent int
	RetryBudgetFloor   int

	// SlowStart is how long a backend that comes (back) into rotation
	// takes to reach its full share (slowstart.go); 0 turns it off.
	SlowStart time.Duration

	// Features are the pool's features, in their order (phase.go), for
	// the requests no route sends to it: a route's chain has features of
	// its own (Routing.Features). The core's own come first in either.
	Features []Feature

	// Sticky binds clients to backends by a cookie (sticky.go); off
	// while Sticky.Cookie is "".
	Sticky Sticky
	// RateLimit, when not nil, limits the requests the pool takes
	// (ratelimit.go), after the limit of the route that sent them.
	RateLimit *RateLimit
	// Hashing (hashkey.go): what of a request the hashing algorithms
	// hash, and the bound on their load in percent of a backend's share
	// of the requests in flight (100..1000; 0 turns it off).
	HashKey           balance.KeySpec
	HashBalanceFactor int

	// Upstream protocol (protocol.go). Protocol is what relay speaks to
	// the pool's backends; BackendProtocols overrides it for the members
	// named (by backend.Host.Name, the canonical URL).
	Protocol         Protocol
	BackendProtocols map[string]Protocol
	// gRPC (grpc.go). BreakerGRPCStatuses are the grpc-status values of
	// a gRPC response that count as failures on its backend's breaker, as
	// BreakerStatuses do for HTTP statuses. MaxGRPCTimeout caps the
	// deadline a client's grpc-timeout sets; 0 leaves it uncapped.
	BreakerGRPCStatuses []int
	MaxGRPCTimeout      time.Duration
}

func (pc *PoolConfig) validate() error {
	var errs []error
	if pc.Retries < 0 || pc.Retries > MaxRetries {
		errs = append(errs, fmt.Errorf("retries %d is outside 0..%d", pc.Retries, MaxRetries))
	}
	if pc.ConnectTimeout <= 0 {
		errs = append(errs, fmt.Errorf("connect timeout %v is not positive", pc.ConnectTimeout))
	}
	if pc.ResponseTimeout <= 0 {
		errs = append(errs, fmt.Errorf("response timeout %v is not positive", pc.ResponseTimeout))
	}
	if pc.MaxIdlePerBackend > 0 && pc.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("upstream idle timeout %v is not positive", pc.IdleTimeout))
	}
	if pc.MaxIdlePerBackend < 0 {
		errs = append(errs, fmt.Errorf("idle connections per backend %d is negative", pc.MaxIdlePerBackend))
	}
	if pc.BreakerFailures < 0 {
		errs = append(errs, fmt.Errorf("breaker failures %d is negative", pc.BreakerFailures))
	}
	if pc.BreakerFailures > 0 && pc.BreakerOpenTime <= 0 {
		errs = append(errs, fmt.Errorf("breaker open time %v is not positive", pc.BreakerOpenTime))
	}
	for _, s := range pc.BreakerStatuses {
		if s < 100 || s > 599 {
			errs = append(errs, fmt.Errorf("breaker status %d is not an HTTP status", s))
		}
	}
	if pc.MaxEjectedPercent < 0 || pc.MaxEjectedPercent > 100 {
		errs = append(errs, fmt.Errorf("max ejected percent %d is outside 0..100", pc.MaxEjectedPercent))
	}
	if pc.MaxRequests < 0 || pc.MaxQueued < 0 {
		errs = append(errs, fmt.Errorf("max requests %d or max queued %d is negative", pc.MaxRequests, pc.MaxQueued))
	}
	if pc.SlowStart < 0 {
		errs = append(errs, fmt.Errorf("slow start %v is negative", pc.SlowStart))
	}
	if f := pc.HashBalanceFactor; f != 0 && (f < 100 || f > 1000) {
		errs = append(errs, fmt.Errorf("hash balance factor %d is outside 100..1000 (0 turns it off)", f))
	}
	if pc.QueueTimeout < 0 {
		errs = append(errs, fmt.Errorf("queue timeout %v is negative", pc.QueueTimeout))
	}
	if r := pc.RateLimit; r != nil && (r.Rate <= 0 || r.Burst < 1 || r.Key == RateByHeader && r.Header == "") {
		errs = append(errs, fmt.Errorf("rate limit of %d a second, burst %d, is not positive, or its header is not named", r.Rate, r.Burst))
	}
	if pc.RetryBudgetPercent < 0 || pc.RetryBudgetPercent > 100 || pc.RetryBudgetFloor < 0 {
		errs = append(errs, fmt.Errorf("retry budget %d%% with floor %d is outside 0..100%% and 0..", pc.RetryBudgetPercent, pc.RetryBudgetFloor))
	}
	if err := pc.Sticky.validate(); err != nil {
		errs = append(errs, err)
	}
	if pc.Protocol > H2C {
		errs = append(errs, fmt.Errorf("protocol %v is not http/1.1, h2 or h2c", pc.Protocol))
	}
	for name, p := range pc.BackendProtocols {
		if p > H2C {
			errs = append(errs, fmt.Errorf("protocol %v of backend %s is not http/1.1, h2 or h2c", p, name))
		}
	}
	for _, s := range pc.BreakerGRPCStatuses {
		if s < 0 || s > 16 {
			errs = append(errs, fmt.Errorf("breaker gRPC status %d is not a gRPC status (0..16)", s))
		}
	}
	if pc.MaxGRPCTimeout < 0 {
		errs = append(errs, fmt.Errorf("max gRPC timeout %v is negative", pc.MaxGRPCTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pool %q: %w", pc.Name, err)
	}
	return nil
}

// Pool is a set of backends, the algorithm that picks among them, its
// settings, and the upstream connections to each backend. Its membership
// is an immutable snapshot swapped atomically; requests load it once and
// never lock.
type Pool struct {
	core  *Core
	conf  atomic.Pointer[settings] // swapped whole by Reconfigure
	state atomic.Pointer[snapshot]

	mu    sync.Mutex        // serialises snapshot rebuilds
	conns map[string]*conns // by backend name; outlive snapshots

	breakerMu sync.Mutex // serialises breaker openings (max ejected)
	queue     queue
	panicking atomic.Bool // balancing over every backend: none in rotation

	// Counters of what no backend accounts for (stats.Pool).
	unanswered     stats.Requests // requests no backend answered
	retries        atomic.Uint64  // attempts after a request's first
	budgetRefusals atomic.Uint64  // retries the budget refused
	// limited counts the requests no route took that the pool's rate
	// limit refused (the core's counter of the pool and route "").
	limited *atomic.Uint64
	// attemptsBase keeps attempts steady across membership changes: what
	// removed members had counted, less what members had counted when they
	// joined.
	attemptsBase atomic.Int64
}

// snapshot is one immutable view of the pool's members: every backend,
// the picker built over them, and their upstream connections. Whether a
// member may be picked now is its own state (backend.Available), read at
// pick time, so health flips, ejections and drains need no new snapshot.
type snapshot struct {
	members []*backend.Backend
	picker  balance.Picker
	conns   map[*backend.Backend]*conns
	// limited says some member has a request limit, so requests may
	// queue and a request ending must wake the queue.
	limited bool
	// sticky holds the members' sticky cookies; nil when sticky
	// sessions are off.
	sticky *stickyTable
}

// settings are a pool's configuration and what is derived from it, read
// by requests with one atomic load and replaced whole by Reconfigure.
type settings struct {
	PoolConfig
	alg             balance.Algorithm
	breakerStatuses statusSet
	breakerGRPC     statusSet // BreakerGRPCStatuses
	budget          *budget
	limit           *limit // the pool's rate limit; nil: none
	chain           *Chain // the core's features, then PoolConfig.Features
}

// cfg returns the pool's settings now.
func (p *Pool) cfg() *settings { return p.conf.Load() }

func newPool(c *Core, pc PoolConfig) (*Pool, error) {
	p := &Pool{core: c, conns: make(map[string]*conns), limited: c.limitedCounter(pc.Name, "")}
	s, err := p.settingsFor(pc, nil)
	if err != nil {
		return nil, err
	}
	p.conf.Store(s)
	return p, nil
}

// settingsFor validates pc and derives the pool's settings from it; a
// retry budget of the same shape as old's is kept, with its tokens.
func (p *Pool) settingsFor(pc PoolConfig, old *settings) (*settings, error) {
	alg, err := balance.Lookup(pc.Algorithm)
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", pc.Name, err)
	}
	if err := pc.validate(); err != nil {
		return nil, err
	}
	s := &settings{PoolConfig: pc, alg: alg, chain: p.core.chainOf(pc.Features)}
	for _, st := range pc.BreakerStatuses {
		s.breakerStatuses.add(st)
	}
	for _, st := range pc.BreakerGRPCStatuses {
		s.breakerGRPC.add(st)
	}
	if old != nil && old.RetryBudgetPercent == pc.RetryBudgetPercent && old.RetryBudgetFloor == pc.RetryBudgetFloor {
		s.budget = old.budget
	} else {
		s.budget = newBudget(pc.RetryBudgetPercent, pc.RetryBudgetFloor, p.attempts)
	}
	var oldLimit *limit
	if old != nil {
		oldLimit = old.limit
	}
	s.limit = p.core.keepLimit(oldLimit, pc.RateLimit, "pool:"+pc.Name)
	return s, nil
}

// Reconfigure makes pc the pool's configuration while it serves, as a
// reload asks: requests that start later use it, those in flight finish
// as they started. The pool keeps its name, members, upstream connections,
// queue and counters; the hooks (Rand, Dial, OnBreaker) are kept too.
func (p *Pool) Reconfigure(pc PoolConfig) error {
	old := p.cfg()
	pc.Name, pc.Rand, pc.Dial, pc.OnBreaker = old.Name, old.Rand, old.Dial, old.OnBreaker
	s, err := p.settingsFor(pc, old)
	if err != nil {
		return err
	}
	p.conf.Store(s)
	// The picker follows the algorithm, and whether requests may queue
	// follows the caps.
	p.SetBackends(p.Backends())
	return nil
}

// Check reports what Reconfigure would refuse in pc, changing nothing.
func (p *Pool) Check(pc PoolConfig) error {
	pc.Name = p.Name()
	_, err := p.settingsFor(pc, nil)
	return err
}

// Name returns the pool's name.
func (p *Pool) Name() string { return p.cfg().Name }

// Features returns the pool's own features (PoolConfig.Features), which
// the requests no route takes meet after the core's.
func (p *Pool) Features() []Feature { return p.cfg().Features }

// SetBackends makes bs the pool's members. Backends that stay keep their
// runtime state and pooled connections; removed ones have their idle
// connections closed. It is the one place a snapshot is built: reloads,
// the admin API and discovery all pass through it. Availability changes
// (health, ejection, drain) do not: pickers skip what may not be picked.
func (p *Pool) SetBackends(bs []*backend.Backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	members := append([]*backend.Backend(nil), bs...)
	var was map[*backend.Backend]bool
	if prev := p.state.Load(); prev != nil && len(prev.members) > 0 {
		was = make(map[*backend.Backend]bool, len(prev.members))
		for _, b := range prev.members {
			was[b] = true
		}
	}
	now := time.Now()
	var base int64 // the change to attemptsBase
	next := &snapshot{members: members, conns: make(map[*backend.Backend]*conns, len(members))}
	keep := make(map[string]bool, len(members))
	for _, b := range members {
		cs := p.conns[b.Name]
		if cs == nil || cs.b != b {
			if cs != nil {
				cs.close()
			}
			cs = newConns(b, &p.conf, p.core.upstreamBufs, p.core.cfg.Descriptors, &p.core.pooled, p.core.cfg.Logger, p.core.backendLog)
			p.conns[b.Name] = cs
		}
		next.conns[b] = cs
		next.limited = next.limited || p.limit(b) > 0
		keep[b.Name] = true
		if was != nil && !was[b] {
			b.Returned(now) // joined a pool that was serving: slow start
		}
		if was == nil || !was[b] {
			base -= int64(b.Served()) // its count so far is not this pool's
		}
	}
	for name, cs := range p.conns {
		if !keep[name] {
			cs.close()
			delete(p.conns, name)
		}
	}
	if prev := p.state.Load(); prev != nil {
		for _, b := range prev.members {
			if next.conns[b] == nil {
				base += int64(b.Served()) // a member leaving keeps its count here
			}
		}
	}
	cfg := p.cfg()
	next.picker = cfg.alg.New(members, balance.Options{Rand: cfg.Rand, BalanceFactor: cfg.HashBalanceFactor})
	next.sticky = newStickyTable(&cfg.Sticky, cfg.Name, members)
	p.attemptsBase.Add(base)
	p.state.Store(next)
}

// attempts is how many requests the pool has sent to its backends, retries
// included: what its members count (Backend.Served), kept steady across
// membership changes by attemptsBase. A reader between the two stores of
// SetBackends may see it off by a member's count for that moment.
func (p *Pool) attempts() uint64 {
	n := p.attemptsBase.Load()
	if snap := p.state.Load(); snap != nil {
		for _, b := range snap.members {
			n += int64(b.Served())
		}
	}
	return uint64(max(n, 0))
}

// Stats returns the pool's own counters and those of its members, as of
// now, into st.
func (p *Pool) Stats(st *stats.Process) {
	st.Pools = append(st.Pools, stats.Pool{
		Name: p.cfg().Name, Queued: int64(p.Queued()),
		Retries: p.retries.Load(), BudgetRefusals: p.budgetRefusals.Load(),
		Unanswered: p.unanswered.Read(),
	})
	for _, b := range p.Backends() {
		st.Backends = append(st.Backends, stats.Backend{
			Pool: p.cfg().Name, Name: b.Name, InFlight: b.InFlight(), Served: b.Served(), Failures: b.Failures(),
			Requests: b.Requests.Read(),
		})
	}
}

// Queued is the number of requests waiting in the pool's queue.
func (p *Pool) Queued() int { return p.queue.Len() }

// Backends returns the pool's members.
func (p *Pool) Backends() []*backend.Backend { return p.state.Load().members }

// Available returns the members that may be picked now.
func (p *Pool) Available() []*backend.Backend {
	var up []*backend.Backend
	for _, b := range p.state.Load().members {
		if b.Available() {
			up = append(up, b)
		}
	}
	return up
}

// closeIdle closes every pooled upstream connection.
func (p *Pool) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cs := range p.conns {
		cs.close()
	}
}
