// Package backend holds one upstream server: its fixed identity (URL, weight)
// and the runtime state that requests and health checks share through atomics
// (healthy, in-flight requests, passive failure counters).
//
// A Backend outlives snapshots and reloads: pickers are rebuilt around the same
// *Backend values, so least-connection counts and failure history carry over.
package backend

import (
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
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

	healthy  atomic.Bool
	inFlight atomic.Int64
	served   atomic.Uint64
	failures atomic.Uint64
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
	b.healthy.Store(true)
	return b, nil
}

// Healthy reports whether the backend may take traffic.
func (b *Backend) Healthy() bool { return b.healthy.Load() }

// SetHealthy records the health state and reports whether it changed, so
// callers log and rebuild snapshots only on transitions.
func (b *Backend) SetHealthy(ok bool) (changed bool) { return b.healthy.Swap(ok) != ok }

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
// broken responses) recorded with Fail.
func (b *Backend) Failures() uint64 { return b.failures.Load() }

// Fail records a forwarding failure.
func (b *Backend) Fail() { b.failures.Add(1) }

// String returns the backend's name.
func (b *Backend) String() string { return b.Name }
