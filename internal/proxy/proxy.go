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
	"time"

	"relay/internal/config"
	"relay/internal/core"
	"relay/internal/h1"
)

// Options are the HTTP/1.1 front door's settings. Every field must be
// set, except Logger, whose zero value discards: OptionsFrom fills them
// from relay's configuration, which is the one home of their defaults.
// What happens to a request once it is read (pools, bodies, the access
// log) is the core's, built by package dataplane.
type Options struct {
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
	// MaxHeaderBytes caps a request head; larger ones get 431.
	MaxHeaderBytes int
	// MaxConnections caps concurrent client connections; 0 means no cap.
	MaxConnections int
	// H2C hands cleartext connections that open with the HTTP/2 preface
	// to the HTTP/2 server (SetHTTP2).
	H2C bool
	// Logger receives errors and events; nil discards them.
	Logger *slog.Logger

	// restAfter is how long an idle keep-alive connection waits on the
	// goroutine that served it (clientConn.awaitHead); 0 means
	// defaultRestAfter. Tests shorten it.
	restAfter time.Duration
}

// OptionsFrom takes the front door's settings from relay's configuration.
func OptionsFrom(c *config.Config) Options {
	return Options{
		HeaderTimeout:     c.ClientHeaderTimeout,
		IdleTimeout:       c.IdleTimeout,
		TunnelIdleTimeout: c.TunnelIdleTimeout,
		BodyTimeout:       c.ClientBodyTimeout,
		BodyMinRate:       c.ClientBodyMinRate,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		MaxConnections:    c.MaxConnections,
		H2C:               c.H2C,
	}
}

// BodyTime is the time a client may take to send a request body, for
// every front door.
func (o *Options) BodyTime() core.BodyTime {
	return core.BodyTime{Idle: o.IdleTimeout, Timeout: o.BodyTimeout, MinRate: o.BodyMinRate}
}

func (o *Options) validate() error {
	var errs []error
	if o.HeaderTimeout <= 0 {
		errs = append(errs, fmt.Errorf("header timeout %v is not positive", o.HeaderTimeout))
	}
	if o.IdleTimeout <= 0 {
		errs = append(errs, fmt.Errorf("idle timeout %v is not positive", o.IdleTimeout))
	}
	if o.MaxHeaderBytes <= 0 {
		errs = append(errs, fmt.Errorf("max header bytes %d is not positive", o.MaxHeaderBytes))
	}
	if o.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("max connections %d is negative", o.MaxConnections))
	}
	return errors.Join(errs...)
}

// Proxy is the HTTP/1.1 front door over a forwarding core. Create it with
// New, give it listeners with Serve and stop it with Shutdown.
type Proxy struct {
	cfg        Options
	core       *core.Core
	clientBufs *h1.BufferPool // read buffers of client connections
	srv        server
	h2         HTTP2 // nil: no HTTP/2
}

// New returns a front door that hands what its clients send to c.
func New(opts Options, c *core.Core) (*Proxy, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	if opts.Logger == nil {
		// nil discards, as documented: the front door logs too (failed
		// handshakes, failed accepts), not only the core.
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.restAfter <= 0 {
		opts.restAfter = defaultRestAfter
	}
	p := &Proxy{cfg: opts, core: c, clientBufs: h1.NewBufferPool(clientBufSize)}
	p.srv.init(p)
	return p, nil
}

// Core returns the forwarding core, for other front doors to share.
func (p *Proxy) Core() *core.Core { return p.core }
