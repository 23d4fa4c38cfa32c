// Package admin is relay's admin listener: Prometheus metrics, a JSON API
// to see and steer the backends, health and readiness for orchestrators,
// configuration reloads, Go's profiler and the dashboard. It reads and
// steers relay through control.Control, which is relay as one,
// however many processes serve; it never sees client traffic.
package admin

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/net/netutil"

	"relay/internal/admin/ui"
	"relay/internal/control"
)

// Options is what the admin listener needs.
type Options struct {
	// Control is relay's control, which the listener reads and steers.
	Control *control.Control
	// Token, when set, is the bearer token every request must carry.
	Token string
	// AllowedHosts are the Host header values, besides the listener's own
	// address, that it answers: HOST (any port) or HOST:PORT, as
	// config.ParseAllowedHost writes them.
	AllowedHosts []string
	// Reload loads the configuration file again and applies it; it
	// returns the new generation, or why the file was refused (a
	// *config.Errors lists every problem).
	Reload func() (uint64, error)
	// IgnoringWeights names the algorithms that ignore weights
	// (config.Options.IgnoringWeights), so the listing can say when the
	// members' weights count for nothing.
	IgnoringWeights []string
	// Log receives the admin listener's own errors.
	Log *slog.Logger

	// addr is the address Start bound, which refusals name.
	addr string
}

// Server is a running admin listener.
type Server struct {
	srv  *http.Server
	addr string
}

// MaxConns bounds the admin listener's open connections.
const MaxConns = 64

// collectTimeout bounds how long a scrape or an API read waits for the
// serving processes' counters.
const collectTimeout = 2 * time.Second

// Handler returns the admin listener's routes.
func Handler(o Options) http.Handler {
	a := &api{o: o, metrics: newMetrics(o)}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.handler())
	mux.HandleFunc("GET /api/pools", a.pools)
	// A pool's backends; /api/backends is the default pool's.
	for _, at := range []string{"/api/pools/{pool}/backends", "/api/backends"} {
		mux.HandleFunc("GET "+at, a.list)
		mux.HandleFunc("POST "+at, a.add)
		mux.HandleFunc("DELETE "+at+"/{name}", a.remove)
		mux.HandleFunc("PATCH "+at+"/{name}", a.patch)
		mux.HandleFunc("POST "+at+"/{name}/{action}", a.act)
	}
	mux.HandleFunc("GET /healthz", a.healthz)
	mux.HandleFunc("GET /readyz", a.readyz)
	mux.HandleFunc("POST /reload", a.reload)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.Handle("GET /{$}", ui.Handler())
	mux.Handle("GET /ui/", ui.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no admin endpoint "+r.Method+" "+r.URL.Path+"; see docs/operations.md")
	})
	return browserGuard(newHostRules(o.AllowedHosts, o.addr), tokenGuard(o.Token, mux))
}

// Start listens on addr and serves the admin routes until Shutdown.
func Start(addr string, o Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// The admin listener's descriptors come from the reserve kept beside
	// the descriptor budget (package fds), so their number is bounded:
	// past MaxConns a connection waits in the kernel's backlog.
	ln = netutil.LimitListener(ln, MaxConns)
	// The host name the listener was given (admin.internal:9901) names
	// it too; an address is matched as the connection's own.
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			o.AllowedHosts = append(slices.Clip(o.AllowedHosts), host)
		}
	}
	o.addr = ln.Addr().String()
	s := &Server{addr: o.addr, srv: &http.Server{
		Handler:           Handler(o),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(o.Log.Handler(), slog.LevelWarn),
	}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Log.Error("admin listener stopped", "err", err)
		}
	}()
	return s, nil
}

// Addr is the address the admin listener is bound to.
func (s *Server) Addr() string { return s.addr }

// Shutdown stops the admin listener, letting requests in progress end
// within a second.
func (s *Server) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		s.srv.Close()
	}
}
