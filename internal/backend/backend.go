// Package backend holds one upstream server: its fixed identity (URL, weight)
// and the runtime state that requests, health checks and operators share
// through atomics: the conditions that decide whether it may be picked, and
// its counters (in flight, served, failures).
//
// Each condition has one owner and is set and cleared only by it: failing
// active checks (the health checker), ejected until a time (the circuit
// breaker), draining and disabled (the operator), effective weight (slow
// start, the operator). Available combines them, in one place, into "may be
// picked now", so a passing health check can no longer undo an ejection or
// a drain.
//
// A Backend outlives snapshots and reloads: pickers are rebuilt around the same
// *Backend values, so least-connection counts and failure history carry over.
package backend

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"

	"relay/internal/config"
	"relay/internal/stats"
	"relay/internal/tlsconf"
)

// Backend is one upstream server. Identity fields are set by New and never
// change; runtime state is only touched through methods.
type Backend struct {
	// URL is the configured address, for example http://127.0.0.1:8001.
	URL *url.URL
	// Name is URL in canonical string form; it identifies the backend in logs,
	// metrics and consistent hashing, so it must be stable across reloads.
	Name string
	// Addr is the host:port to dial.
	Addr string
	// Weight is the relative share of traffic, at least 1.
	Weight int

	// Requests counts the requests the backend answered (the forwarding
	// core observes each once it is done); Checks counts its active health
	// checks.
	Requests stats.Requests
	Checks   stats.Checks

	// tls is how relay speaks TLS to an https backend; nil for http.
	tls atomic.Pointer[tls.Config]

	// blocked has one bit per condition that keeps the backend out of
	// rotation, so Available is one atomic load while none is set.
	blocked      atomic.Uint32
	ejectedUntil atomic.Int64 // Unix nanoseconds; meaningful while ejected is set
	weight       atomic.Int64 // effective weight
	inFlight     atomic.Int64
	served       atomic.Uint64
	failures     atomic.Uint64
	consecutive  atomic.Int32 // failures since the last success
	trips        atomic.Int32 // breaker openings since the last success
	probing      atomic.Bool  // a half-open breaker's probe is out
	returned     atomic.Int64 // when it last came into rotation, for slow start
	maxRequests  atomic.Int64 // cap on requests in flight; 0: the pool's default
}

// New returns a backend for u with the given weight. It starts healthy
// (optimistic); the health checker decides otherwise before traffic is served.
// The port defaults to 80 for http and 443 for https when u has none.
func New(u *url.URL, weight int) (*Backend, error) {
	if u == nil || u.Host == "" {
		return nil, fmt.Errorf("backend: url %q has no host", u)
	}
	if weight < 1 {
		return nil, fmt.Errorf("backend %q: weight %d is below 1", u, weight)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	b := &Backend{URL: u, Name: u.Scheme + "://" + u.Host, Addr: net.JoinHostPort(host, port), Weight: weight}
	b.weight.Store(int64(weight))
	if u.Scheme == "https" {
		// Until SetTLS says otherwise: the system's roots, the URL's
		// host. Empty settings load no file, so this cannot fail.
		tc, err := tlsconf.Client(u, config.UpstreamTLS{})
		if err != nil {
			return nil, err
		}
		b.tls.Store(tc)
	}
	return b, nil
}

// TLS returns the client TLS settings of an https backend, nil for an
// http one.
func (b *Backend) TLS() *tls.Config { return b.tls.Load() }

// SetTLS sets how connections to the backend speak TLS from now on;
// connections already open keep theirs.
func (b *Backend) SetTLS(c *tls.Config) { b.tls.Store(c) }

// InFlight is the number of requests currently forwarded to the backend.
func (b *Backend) InFlight() int64 { return b.inFlight.Load() }

// Acquire counts a request as in flight. The proxy calls it right after the
// pick, so a burst of picks sees each other's load.
func (b *Backend) Acquire() { b.inFlight.Add(1); b.served.Add(1) }

// Release ends a request started with Acquire.
func (b *Backend) Release() { b.inFlight.Add(-1) }

// Served is the number of requests ever forwarded to the backend.
func (b *Backend) Served() uint64 { return b.served.Load() }

// Failures is the number of forwarding failures (dial errors, timeouts,
// broken responses, statuses a pool counts as failures) recorded with Fail.
func (b *Backend) Failures() uint64 { return b.failures.Load() }

// MaxRequests is the cap on requests in flight to the backend; 0 leaves
// it to its pool's default.
func (b *Backend) MaxRequests() int { return int(b.maxRequests.Load()) }

// SetMaxRequests changes the cap on requests in flight to the backend
// while it serves (0: the pool's default), as a reload asks. Requests
// already in flight finish; a lower cap admits no new one until they are
// below it.
func (b *Backend) SetMaxRequests(n int) { b.maxRequests.Store(int64(max(n, 0))) }

// String returns the backend's name.
func (b *Backend) String() string { return b.Name }
