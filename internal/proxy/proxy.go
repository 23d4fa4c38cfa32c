// Package proxy is relay's HTTP/1.1 front door: it accepts client
// connections, reads requests with relay's own wire engine (package h1),
// hands each to the forwarding core (package core) and writes what the
// core answers back in HTTP/1.1, keeping connections alive and draining
// them on shutdown. Picking, retrying, upstream connections and accounting
// are the core's; this package owns the client side of the wire.
//
// A connection reuses one core.Exchange, one request head and one response
// buffer for all its requests, so the steady state allocates nothing.
package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/core"
	"relay/internal/fds"
	"relay/internal/h1"
	"relay/internal/logging"
)

// Config holds the settings of the HTTP/1.1 front door and of the pool
// behind it. Every field must be set, except the hooks (the pool's Rand and
// Dial, AccessLog, Logger), whose zero values work: ConfigFrom fills them
// from relay's configuration, which is the one home of their defaults.
type Config struct {
	// Pool configures the pool every request goes to; its Name defaults
	// to DefaultPool.
	Pool core.PoolConfig
	// HeaderTimeout bounds reading a request head once its first byte has
	// arrived.
	HeaderTimeout time.Duration
	// IdleTimeout bounds the wait for the next request on a keep-alive
	// connection, any single wait for request body bytes, and any single
	// wait for the client to take response bytes.
	IdleTimeout time.Duration
	// TunnelIdleTimeout closes a tunnel in which neither side sent
	// anything for that long; 0 means never.
	TunnelIdleTimeout time.Duration
	// BodyTimeout bounds the time a client takes to send a request body,
	// extended by a second for every BodyMinRate bytes it sent; 0 leaves
	// only IdleTimeout between reads.
	BodyTimeout time.Duration
	BodyMinRate int
	// MaxBodyBytes and BodyBufferBytes are the core's (core.Config).
	MaxBodyBytes    int64
	BodyBufferBytes int64
	// MaxHeaderBytes caps a request head; larger ones get 431.
	MaxHeaderBytes int
	// MaxConnections caps concurrent client connections; 0 means no cap.
	MaxConnections int
	// H2C hands cleartext connections that open with the HTTP/2 preface
	// to the HTTP/2 server (SetHTTP2).
	H2C bool
	// TrustedProxies are the peers whose X-Forwarded-* fields are kept and
	// whose X-Forwarded-For decides the client address for ip-hash.
	TrustedProxies []netip.Prefix
	// AccessLog receives one entry per request; nil turns access logs off.
	AccessLog *logging.AccessLog
	// RequestID gives every request an X-Request-Id (core.Config).
	RequestID bool
	// Logger receives errors and events; nil discards them.
	Logger *slog.Logger
	// Descriptors is the process's budget of file descriptors: every
	// client connection and every upstream connection takes a place in
	// it (package fds); nil has no bound.
	Descriptors *fds.Budget
	// Instance is relay's instance id, which its Via entry carries
	// (core.Config); "" makes one for this proxy.
	Instance string

	// restAfter is how long an idle keep-alive connection waits on the
	// goroutine that served it (clientConn.awaitHead); 0 means
	// defaultRestAfter. Tests shorten it.
	restAfter time.Duration
}

// ConfigFrom takes the front door's and the default pool's settings from
// relay's configuration.
func ConfigFrom(c *config.Config) Config {
	return Config{
		Pool:              PoolConfigFrom(c),
		HeaderTimeout:     c.ClientHeaderTimeout,
		IdleTimeout:       c.IdleTimeout,
		TunnelIdleTimeout: c.TunnelIdleTimeout,
		BodyTimeout:       c.ClientBodyTimeout,
		BodyMinRate:       c.ClientBodyMinRate,
		MaxBodyBytes:      c.MaxBodyBytes,
		BodyBufferBytes:   c.BodyBufferBytes,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		MaxConnections:    c.MaxConnections,
		H2C:               c.H2C,
		TrustedProxies:    c.TrustedProxies,
		RequestID:         c.RequestID,
	}
}

// BodyTime is the time a client may take to send a request body, for
// every front door.
func (c *Config) BodyTime() core.BodyTime {
	return core.BodyTime{Idle: c.IdleTimeout, Timeout: c.BodyTimeout, MinRate: c.BodyMinRate}
}

// PoolConfigFrom takes the default pool's settings from relay's
// configuration.
func PoolConfigFrom(c *config.Config) core.PoolConfig {
	return core.PoolConfig{
		Name:              DefaultPool,
		Algorithm:         c.Algorithm,
		Retries:           c.Retries,
		ConnectTimeout:    c.ConnectTimeout,
		ResponseTimeout:   c.ResponseTimeout,
		MaxIdlePerBackend: c.MaxIdleConnsPerBackend,
		IdleTimeout:       c.UpstreamIdleTimeout,

		BreakerFailures:   c.BreakerFailures,
		BreakerStatuses:   c.BreakerStatuses,
		BreakerOpenTime:   c.BreakerOpenTime,
		MaxEjectedPercent: c.MaxEjectedPercent,

		MaxRequests:  c.BackendMaxRequests,
		MaxQueued:    c.MaxQueuedRequests,
		QueueTimeout: c.QueueTimeout,

		RetryBudgetPercent: c.RetryBudgetPercent,
		RetryBudgetFloor:   c.RetryBudgetFloor,

		SlowStart: c.SlowStart,
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.HeaderTimeout <= 0 {
		errs = append(errs, fmt.Errorf("header timeout %v is not positive", c.HeaderTimeout))
	}
	if c.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("idle timeout %v is not positive", c.IdleTimeout))
	}
	if c.MaxHeaderBytes <= 0 {
		errs = append(errs, fmt.Errorf("max header bytes %d is not positive", c.MaxHeaderBytes))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("max connections %d is negative", c.MaxConnections))
	}
	return errors.Join(errs...)
}

// DefaultPool is the name of the pool every request goes to until routes
// exist.
const DefaultPool = "default"

// Proxy is the HTTP/1.1 front door over a forwarding core with one pool.
// Create it with New, give it listeners with Serve and stop it with
// Shutdown.
type Proxy struct {
	cfg        Config
	core       *core.Core
	pool       *core.Pool
	clientBufs *h1.BufferPool // read buffers of client connections
	srv        server
	h2         HTTP2 // nil: no HTTP/2
}

// New returns a front door over a core whose default pool holds bs.
func New(cfg Config, bs []*backend.Backend) (*Proxy, error) {
	ferr := cfg.validate()
	if cfg.Logger == nil {
		// nil discards, as documented: the front door logs too (failed
		// handshakes, failed accepts), not only the core.
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := core.New(core.Config{TrustedProxies: cfg.TrustedProxies, AccessLog: cfg.AccessLog, RequestID: cfg.RequestID, Logger: cfg.Logger,
		MaxBodyBytes: cfg.MaxBodyBytes, HoldBodyBytes: cfg.BodyBufferBytes, Descriptors: cfg.Descriptors, Instance: cfg.Instance})
	if cfg.Pool.Name == "" {
		cfg.Pool.Name = DefaultPool
	}
	pool, err := c.AddPool(cfg.Pool, bs)
	// Every problem at once, the front door's and the pool's.
	if err := errors.Join(ferr, err); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if cfg.restAfter <= 0 {
		cfg.restAfter = defaultRestAfter
	}
	p := &Proxy{cfg: cfg, core: c, pool: pool, clientBufs: h1.NewBufferPool(clientBufSize)}
	p.srv.init(p)
	return p, nil
}

// Core returns the forwarding core, for other front doors to share.
func (p *Proxy) Core() *core.Core { return p.core }

// SetBackends makes bs the default pool's members (core.Pool.SetBackends).
func (p *Proxy) SetBackends(bs []*backend.Backend) { p.pool.SetBackends(bs) }

// Reconfigure gives the default pool new settings while it serves
// (core.Pool.Reconfigure).
func (p *Proxy) Reconfigure(pc core.PoolConfig) error { return p.pool.Reconfigure(pc) }

// Backends returns the default pool's members.
func (p *Proxy) Backends() []*backend.Backend { return p.pool.Backends() }

// Available returns the default pool's members that may be picked now.
func (p *Proxy) Available() []*backend.Backend { return p.pool.Available() }
