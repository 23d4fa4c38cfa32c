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
	"relay/internal/logging"
)

// Config is what a test relay is built from: the front door's options and,
// as relay's data plane builds them from its configuration, the core's
// settings and those of its one pool.
type Config struct {
	Pool              core.PoolConfig
	HeaderTimeout     time.Duration
	IdleTimeout       time.Duration
	TunnelIdleTimeout time.Duration
	BodyTimeout       time.Duration
	BodyMinRate       int
	MaxBodyBytes      int64
	BodyBufferBytes   int64
	MaxHeaderBytes    int
	MaxConnections    int
	H2C               bool
	TrustedProxies    []netip.Prefix
	AccessLog         *logging.AccessLog
	RequestID         bool
	Logger            *slog.Logger
	Descriptors       *fds.Budget
	Instance          string
	restAfter         time.Duration
	// routing, when set, puts routes in front of the pool once it is
	// built (benchmarks).
	routing func(*core.Core)
	// respExtra is how many bytes relay adds to each response of the
	// benchmark's backends (a Set-Cookie field, say).
	respExtra int
	// respFields are fields the benchmark's backends add to each
	// response, each line ending in CRLF.
	respFields string
	// features, when set, makes the core's own features
	// (core.Config.Features); nil takes core.DefaultFeatures.
	features func(*core.Core) []core.Feature
}

// testPool names the one pool of a test relay.
const testPool = "default"

// ConfigFrom takes a test relay's settings from relay's configuration.
func ConfigFrom(c *config.Config) Config {
	o := OptionsFrom(c)
	return Config{
		Pool: core.PoolConfig{
			Name: testPool, Algorithm: c.Algorithm, Retries: c.Retries,
			ConnectTimeout: c.ConnectTimeout, ResponseTimeout: c.ResponseTimeout,
			MaxIdlePerBackend: c.MaxIdleConnsPerBackend, IdleTimeout: c.UpstreamIdleTimeout,
			BreakerFailures: c.BreakerFailures, BreakerStatuses: c.BreakerStatuses,
			BreakerOpenTime: c.BreakerOpenTime, MaxEjectedPercent: c.MaxEjectedPercent,
			MaxRequests: c.BackendMaxRequests, MaxQueued: c.MaxQueuedRequests, QueueTimeout: c.QueueTimeout,
			RetryBudgetPercent: c.RetryBudgetPercent, RetryBudgetFloor: c.RetryBudgetFloor,
			SlowStart: c.SlowStart,
		},
		HeaderTimeout: o.HeaderTimeout, IdleTimeout: o.IdleTimeout, TunnelIdleTimeout: o.TunnelIdleTimeout,
		BodyTimeout: o.BodyTimeout, BodyMinRate: o.BodyMinRate,
		MaxBodyBytes: c.MaxBodyBytes, BodyBufferBytes: c.BodyBufferBytes,
		MaxHeaderBytes: o.MaxHeaderBytes, MaxConnections: o.MaxConnections, H2C: o.H2C,
		TrustedProxies: c.TrustedProxies, RequestID: c.RequestID,
	}
}

// build makes a core with one pool over bs and a front door over it, as
// relay's data plane does.
func build(cfg Config, bs []*backend.Backend) (*Proxy, error) {
	c := core.New(core.Config{TrustedProxies: cfg.TrustedProxies, AccessLog: cfg.AccessLog, RequestID: cfg.RequestID, Logger: cfg.Logger,
		MaxBodyBytes: cfg.MaxBodyBytes, HoldBodyBytes: cfg.BodyBufferBytes, Descriptors: cfg.Descriptors, Instance: cfg.Instance,
		Features: cfg.features})
	if cfg.Pool.Name == "" {
		cfg.Pool.Name = testPool
	}
	if s := core.NewStickyCookies(cfg.Pool.Sticky); s != nil {
		// The sticky section's cookie, as the data plane adds it.
		cfg.Pool.Features = append(cfg.Pool.Features, s)
	}
	_, perr := c.AddPool(cfg.Pool, bs)
	p, err := New(Options{
		HeaderTimeout: cfg.HeaderTimeout, IdleTimeout: cfg.IdleTimeout, TunnelIdleTimeout: cfg.TunnelIdleTimeout,
		BodyTimeout: cfg.BodyTimeout, BodyMinRate: cfg.BodyMinRate, MaxHeaderBytes: cfg.MaxHeaderBytes,
		MaxConnections: cfg.MaxConnections, H2C: cfg.H2C, Logger: cfg.Logger, restAfter: cfg.restAfter,
	}, c)
	if err := errors.Join(err, perr); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	return p, nil
}

// BodyTime is the time a client may take to send a request body.
func (c *Config) BodyTime() core.BodyTime {
	return core.BodyTime{Idle: c.IdleTimeout, Timeout: c.BodyTimeout, MinRate: c.BodyMinRate}
}

// pool is the one pool of a test relay.
func (p *Proxy) pool() *core.Pool { return p.core.Pool(testPool) }
