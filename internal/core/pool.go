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
)

// MaxRetries is the most retries a pool may ask for: a request is tried on
// at most balance.MaxAttempts backends, the first try included.
const MaxRetries = balance.MaxAttempts - 1

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
	// Dial, when set, opens upstream connections instead of net.Dialer;
	// benchmarks use it for in-memory backends.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
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
	if pc.MaxIdlePerBackend < 0 {
		errs = append(errs, fmt.Errorf("idle connections per backend %d is negative", pc.MaxIdlePerBackend))
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
	cfg   PoolConfig
	alg   balance.Algorithm
	state atomic.Pointer[snapshot]

	mu    sync.Mutex        // serialises snapshot rebuilds
	conns map[string]*conns // by backend name; outlive snapshots
}

// snapshot is one immutable view of the pool's members: every backend,
// the picker built over them, and their upstream connections. Whether a
// member may be picked now is its own state (backend.Available), read at
// pick time, so health flips, ejections and drains need no new snapshot.
type snapshot struct {
	members []*backend.Backend
	picker  balance.Picker
	conns   map[*backend.Backend]*conns
}

func newPool(c *Core, pc PoolConfig) (*Pool, error) {
	alg, err := balance.Lookup(pc.Algorithm)
	if err != nil {
		return nil, fmt.Errorf("pool %q: %w", pc.Name, err)
	}
	if err := pc.validate(); err != nil {
		return nil, err
	}
	return &Pool{core: c, cfg: pc, alg: alg, conns: make(map[string]*conns)}, nil
}

// Name returns the pool's name.
func (p *Pool) Name() string { return p.cfg.Name }

// SetBackends makes bs the pool's members. Backends that stay keep their
// runtime state and pooled connections; removed ones have their idle
// connections closed. It is the one place a snapshot is built: reloads,
// the admin API and discovery all pass through it. Availability changes
// (health, ejection, drain) do not: pickers skip what may not be picked.
func (p *Pool) SetBackends(bs []*backend.Backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	members := append([]*backend.Backend(nil), bs...)
	next := &snapshot{members: members, conns: make(map[*backend.Backend]*conns, len(members))}
	keep := make(map[string]bool, len(members))
	for _, b := range members {
		cs := p.conns[b.Name]
		if cs == nil || cs.b != b {
			if cs != nil {
				cs.close()
			}
			cs = newConns(b, &p.cfg, p.core.upstreamBufs)
			p.conns[b.Name] = cs
		}
		next.conns[b] = cs
		keep[b.Name] = true
	}
	for name, cs := range p.conns {
		if !keep[name] {
			cs.close()
			delete(p.conns, name)
		}
	}
	next.picker = p.alg.New(members, balance.Options{Rand: p.cfg.Rand})
	p.state.Store(next)
}

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
