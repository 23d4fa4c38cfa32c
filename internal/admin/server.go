// Package admin is relay's admin listener: Prometheus metrics, a JSON API
// to see and steer the backends, health and readiness for orchestrators,
// configuration reloads, Go's profiler and the dashboard. It reads and
// steers relay through the supervisor's Control, which is relay as one,
// however many processes serve; it never sees client traffic.
package admin

import (
	"context"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"relay/internal/admin/ui"
	"relay/internal/supervisor"
)

// Options is what the admin listener needs.
type Options struct {
	// Control is relay's control, which the listener reads and steers.
	Control *supervisor.Control
	// Token, when set, is the bearer token every request must carry.
	Token string
	// Reload loads the configuration file again and applies it; it
	// returns the new generation, or why the file was refused (a
	// *config.Errors lists every problem).
	Reload func() (uint64, error)
	// Pool and Algorithm name the pool shown.
	Pool, Algorithm string
	// Log receives the admin listener's own errors.
	Log *slog.Logger
}

// Server is a running admin listener.
type Server struct {
	srv  *http.Server
	addr string
}

// collectTimeout bounds how long a scrape or an API read waits for the
// serving processes' counters.
const collectTimeout = 2 * time.Second

// Handler returns the admin listener's routes.
func Handler(o Options) http.Handler {
	a := &api{o: o, metrics: newMetrics(o)}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", a.metrics.handler())
	mux.HandleFunc("GET /api/backends", a.list)
	mux.HandleFunc("POST /api/backends", a.add)
	mux.HandleFunc("DELETE /api/backends/{name}", a.remove)
	mux.HandleFunc("POST /api/backends/{name}/{action}", a.act)
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
		writeError(w, http.StatusNotFound, "no admin endpoint "+r.Method+" "+r.URL.Path+"; see README, Operations")
	})
	return guard(o.Token, mux)
}

// guard refuses requests without the bearer token, when one is set.
func guard(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="relay admin"`)
			writeError(w, http.StatusUnauthorized, "this admin listener needs Authorization: Bearer <admin_token>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Start listens on addr and serves the admin routes until Shutdown.
func Start(addr string, o Options) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{addr: ln.Addr().String(), srv: &http.Server{
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
