// Package proxy is relay's request path: it accepts client connections,
// reads requests with the h1 wire package, picks a backend from the current
// snapshot, forwards the request over a pooled upstream connection, retries
// what is safe to retry, maps failures to 502/503/504 and streams the
// response back.
//
// The set of backends that may take traffic lives in an immutable snapshot
// (backends plus the picker built for them) published through an atomic
// pointer: requests load it once and never lock; membership changes build the
// next snapshot in one place, SetBackends.
package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"relay/internal/backend"
	"relay/internal/balance"
	"relay/internal/h1"
	"relay/internal/logging"
)

// Config holds what the request path needs. Zero durations and sizes take
// the defaults noted on each field.
type Config struct {
	// Algorithm is a balance registry name; default round-robin.
	Algorithm string
	// Rand, when set, is the randomness pickers use (tests inject it).
	Rand func(n int) int
	// Retries is how many other backends a failed request may be tried on
	// when that is safe (see try and responseFailed in forward.go); 0 or
	// negative means none.
	Retries int
	// Dial, when set, opens upstream connections instead of net.Dialer;
	// benchmarks use it for in-memory backends.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// ConnectTimeout bounds dialing a backend; default 5s.
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait for a backend's response head, and
	// any single wait for body bytes; default 60s.
	ResponseTimeout time.Duration
	// HeaderTimeout bounds reading the first request head on a connection;
	// default 10s.
	HeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection and any single wait for request body bytes; default 60s.
	IdleTimeout time.Duration
	// MaxIdlePerBackend caps pooled idle connections per backend; 0 means
	// the default 256 and a negative value keeps none.
	MaxIdlePerBackend int
	// MaxHeaderBytes caps a request head; larger ones get 431. Default 16 KiB.
	MaxHeaderBytes int
	// MaxConnections caps concurrent client connections; 0 means no cap.
	MaxConnections int
	// TrustedProxies are the peers whose X-Forwarded-* fields are kept and
	// whose X-Forwarded-For decides the client address for ip-hash.
	TrustedProxies []netip.Prefix
	// AccessLog receives one entry per request; nil turns access logs off.
	AccessLog *logging.AccessLog
	// Logger receives errors and events; nil discards them.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.ConnectTimeout, 5*time.Second)
	def(&c.ResponseTimeout, 60*time.Second)
	def(&c.HeaderTimeout, 10*time.Second)
	def(&c.IdleTimeout, 60*time.Second)
	if c.Algorithm == "" {
		c.Algorithm = "round-robin"
	}
	switch {
	case c.MaxIdlePerBackend == 0:
		c.MaxIdlePerBackend = 256
	case c.MaxIdlePerBackend < 0:
		c.MaxIdlePerBackend = 0
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = 16 << 10
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// snapshot is one immutable view of the pool: every configured backend, the
// ones available now, and the picker built over those.
type snapshot struct {
	all     []*backend.Backend
	up      []*backend.Backend
	picker  balance.Picker
	pools   map[*backend.Backend]*pool
	hashKey bool // the picker hashes the client address
}

// Proxy is the request path. Create it with New, give it listeners with
// Serve and stop it with Shutdown.
type Proxy struct {
	cfg   Config
	build balance.Constructor
	state atomic.Pointer[snapshot]

	clientBufs   *h1.BufferPool // read buffers of client connections
	upstreamBufs *h1.BufferPool // read buffers of upstream connections

	mu    sync.Mutex       // serialises snapshot rebuilds
	pools map[string]*pool // by backend name; outlive snapshots

	srv server
}

// New returns a proxy over bs with the configured algorithm.
func New(cfg Config, bs []*backend.Backend) (*Proxy, error) {
	cfg.setDefaults()
	build, err := balance.Lookup(cfg.Algorithm)
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, build: build, pools: make(map[string]*pool), clientBufs: h1.NewBufferPool(clientBufSize), upstreamBufs: h1.NewBufferPool(upstreamBufSize)}
	p.srv.init(p)
	p.SetBackends(bs)
	return p, nil
}

// SetBackends makes bs the configured pool. Backends keep their runtime
// state and pooled connections when they stay; removed ones have their idle
// connections closed. It is the one place a snapshot is built, so health
// changes (Rebuild), reloads and discovery all pass through it.
func (p *Proxy) SetBackends(bs []*backend.Backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	all := append([]*backend.Backend(nil), bs...)
	next := &snapshot{all: all, pools: make(map[*backend.Backend]*pool, len(all)), hashKey: p.cfg.Algorithm == "ip-hash"}
	keep := make(map[string]bool, len(all))
	for _, b := range all {
		pl := p.pools[b.Name]
		if pl == nil || pl.b != b {
			if pl != nil {
				pl.close()
			}
			pl = newPool(b, &p.cfg, p.upstreamBufs)
			p.pools[b.Name] = pl
		}
		next.pools[b] = pl
		keep[b.Name] = true
		if b.Healthy() {
			next.up = append(next.up, b)
		}
	}
	for name, pl := range p.pools {
		if !keep[name] {
			pl.close()
			delete(p.pools, name)
		}
	}
	if len(next.up) == 0 {
		next.picker, _ = balance.Build(p.cfg.Algorithm, nil, balance.Options{})
	} else {
		next.picker = p.build(next.up, balance.Options{Rand: p.cfg.Rand})
	}
	p.state.Store(next)
}

// Rebuild publishes a new snapshot after backends changed health. It is the
// callback the health checker calls on every transition.
func (p *Proxy) Rebuild() { p.SetBackends(p.state.Load().all) }

// Backends returns the configured backends.
func (p *Proxy) Backends() []*backend.Backend { return p.state.Load().all }

// Available returns the backends currently in rotation.
func (p *Proxy) Available() []*backend.Backend { return p.state.Load().up }

// closeIdle closes every pooled upstream connection.
func (p *Proxy) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pl := range p.pools {
		pl.close()
	}
}

// pick chooses a backend not in tried. Pickers know nothing of earlier
// attempts, so it asks a few times and then falls back to the first
// untried available backend.
func (s *snapshot) pick(key uint64, tried []*backend.Backend) *backend.Backend {
	for i := 0; i < 3; i++ {
		b := s.picker.Pick(key)
		if b == nil || !contains(tried, b) {
			return b
		}
		if len(s.up) <= 1 {
			return nil
		}
	}
	for _, b := range s.up {
		if !contains(tried, b) {
			return b
		}
	}
	return nil
}

func contains(bs []*backend.Backend, b *backend.Backend) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}
