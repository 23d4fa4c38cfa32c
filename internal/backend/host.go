package backend

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"time"

	"relay/internal/config"
	"relay/internal/stats"
	"relay/internal/tlsconf"
)

// Host is one upstream address and what relay knows of it whichever pools
// hold it: its circuit breaker, how relay speaks TLS to it, its checks'
// counters. A pool holds a Host through a Backend, its membership there
// (weight, request cap, drain, slow start, and the verdict of the pool's
// health check, which pools with the same check share), so one address
// serving two pools is ejected once, as Caddy keeps its hosts apart from
// its upstreams.
//
// Identity fields are set by NewHost and never change.
type Host struct {
	// URL is the configured address, for example http://127.0.0.1:8001.
	URL *url.URL
	// Name is URL in canonical string form; it identifies the address in
	// logs, metrics and consistent hashing, so it must be stable across
	// reloads.
	Name string
	// Addr is the host:port to dial.
	Addr string
	// Checks counts the address's active health checks.
	Checks stats.Checks

	// tls is how relay speaks TLS to an https address; nil for http.
	tls atomic.Pointer[tls.Config]
	// cond has one bit per condition of the address that keeps its
	// members out of rotation (ejected).
	cond         atomic.Uint32
	ejectedUntil atomic.Int64 // Unix nanoseconds; meaningful while ejected is set
	consecutive  atomic.Int32 // failures since the last success
	trips        atomic.Int32 // breaker openings since the last success
	probing      atomic.Bool  // a half-open breaker's probe is out
	returned     atomic.Int64 // when its conditions last cleared, for slow start
}

// NewHost returns the address u names. The port defaults to 80 for http
// and 443 for https when u has none.
func NewHost(u *url.URL) (*Host, error) {
	if u == nil || u.Host == "" {
		return nil, fmt.Errorf("backend: url %q has no host", u)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	h := &Host{URL: u, Name: u.Scheme + "://" + u.Host, Addr: net.JoinHostPort(host, port)}
	if u.Scheme == "https" {
		// Until SetTLS says otherwise: the system's roots, the URL's
		// host. Empty settings load no file, so this cannot fail.
		tc, err := tlsconf.Client(u, config.UpstreamTLS{})
		if err != nil {
			return nil, err
		}
		h.tls.Store(tc)
	}
	return h, nil
}

// TLS returns the client TLS settings of an https address, nil for an
// http one.
func (h *Host) TLS() *tls.Config { return h.tls.Load() }

// SetTLS sets how connections to the address speak TLS from now on;
// connections already open keep theirs.
func (h *Host) SetTLS(c *tls.Config) { h.tls.Store(c) }

// setCond raises or clears one of the address's condition bits and
// reports whether that changed it.
func (h *Host) setCond(bit uint32, on bool) (changed bool) {
	if on {
		return h.cond.Or(bit)&bit == 0
	}
	old := h.cond.And(^bit)
	if old&bit == 0 {
		return false
	}
	if old == bit {
		h.returned.Store(time.Now().UnixNano()) // nothing else keeps it out
	}
	return true
}

// Eject keeps the address out of rotation in every pool until the given
// time, as a circuit breaker or outlier detection does, and reports
// whether it was not ejected before. Ejecting an ejected address moves its
// end.
func (h *Host) Eject(until time.Time) (changed bool) {
	was := !h.EjectedUntil().IsZero()
	h.ejectedUntil.Store(until.UnixNano())
	h.setCond(ejected, true)
	return !was
}

// EjectedUntil returns when the current ejection ends, or the zero time
// when the address is not ejected or its ejection has run out.
func (h *Host) EjectedUntil() time.Time {
	if h.cond.Load()&ejected == 0 {
		return time.Time{}
	}
	until := time.Unix(0, h.ejectedUntil.Load())
	if !time.Now().Before(until) {
		return time.Time{}
	}
	return until
}

// Restore ends an ejection early and reports whether there was one.
func (h *Host) Restore() (changed bool) { return h.setCond(ejected, false) }
