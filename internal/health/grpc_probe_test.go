package health

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"relay/internal/backend"
	"relay/internal/fds"
	"relay/internal/grpctest"
	"relay/internal/h2up"
	"relay/internal/testcert"
)

// grpcServer starts a real gRPC server with its health service, over h2c
// or over TLS, and returns it with a backend for it whose TLS settings
// trust the server's certificate.
func grpcServer(t *testing.T, overTLS bool) (*grpctest.Server, *backend.Backend) {
	t.Helper()
	if !overTLS {
		s := grpctest.Start(t)
		return s, newBackend(t, s.URL)
	}
	ca := testcert.NewCA(t)
	s := grpctest.StartTLS(t, ca.Server(t, testcert.ECDSA, "127.0.0.1").TLS)
	b := newBackend(t, s.URL)
	b.SetTLS(&tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})
	return s, b
}

func probeOnce(g *grpcCheck, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return g.probe(ctx)
}

// TestGRPCProbe asks a real gRPC health service, over h2c and over TLS,
// for the server's overall health and for named services.
func TestGRPCProbe(t *testing.T) {
	const (
		up   = healthpb.HealthCheckResponse_SERVING
		down = healthpb.HealthCheckResponse_NOT_SERVING
	)
	tests := []struct {
		name    string
		overall healthpb.HealthCheckResponse_ServingStatus
		named   map[string]healthpb.HealthCheckResponse_ServingStatus
		service string
		errHas  string // empty: the probe passes
	}{
		{name: "serving passes", overall: up},
		{name: "not serving fails", overall: down, errHas: "status NOT_SERVING"},
		{name: "the service name is sent", overall: down, named: map[string]healthpb.HealthCheckResponse_ServingStatus{"svc": up}, service: "svc"},
		{name: "a named service not serving fails", overall: up, named: map[string]healthpb.HealthCheckResponse_ServingStatus{"svc": down}, service: "svc",
			errHas: `of "svc" on`},
		{name: "an unknown service fails", overall: up, service: "nope",
			errHas: "grpc-status 5 NOT_FOUND: unknown service"},
	}
	for _, overTLS := range []bool{false, true} {
		for _, tt := range tests {
			name := tt.name + " over h2c"
			if overTLS {
				name = tt.name + " over TLS"
			}
			t.Run(name, func(t *testing.T) {
				s, b := grpcServer(t, overTLS)
				s.Health.SetServingStatus("", tt.overall)
				for svc, st := range tt.named {
					s.Health.SetServingStatus(svc, st)
				}
				for _, keep := range []bool{false, true} {
					g := newGRPCCheck(b, tt.service, 5*time.Second, keep)
					err := probeOnce(g, 5*time.Second)
					switch {
					case tt.errHas == "" && err != nil:
						t.Errorf("keep %v: %v", keep, err)
					case tt.errHas != "" && err == nil:
						t.Errorf("keep %v: the probe passed; want a failure with %q", keep, tt.errHas)
					case tt.errHas != "" && !strings.Contains(err.Error(), tt.errHas):
						t.Errorf("keep %v: error %q does not mention %q", keep, err, tt.errHas)
					}
					if held := g.holds(); held != (keep && err == nil) {
						t.Errorf("keep %v, err %v: a connection kept: %v", keep, err, held)
					}
					g.closeIdle()
				}
			})
		}
	}
}

// TestGRPCProbeReusesItsConnection: with ReuseConnection the checks of a
// backend are streams on one HTTP/2 connection, which a backend that
// drops it has replaced at the next check without a failure.
func TestGRPCProbeReusesItsConnection(t *testing.T) {
	s, b := grpcServer(t, false)
	g := newGRPCCheck(b, "", 5*time.Second, true)
	defer g.closeIdle()
	if err := probeOnce(g, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	first := g.idle.Load()
	if err := probeOnce(g, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if g.idle.Load() != first {
		t.Fatal("the second check did not run on the kept connection")
	}
	s.Cut()
	if err := probeOnce(g, 5*time.Second); err != nil {
		t.Fatalf("after the backend cut the kept connection: %v", err)
	}
	if c := g.idle.Load(); c == nil || c == first {
		t.Fatal("the cut connection was not replaced by a new kept one")
	}
}

// TestGRPCProbeHTTP1Backend: a backend that speaks only HTTP/1.1 fails,
// and the reason says so.
func TestGRPCProbeHTTP1Backend(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	g := newGRPCCheck(newBackend(t, srv.URL), "", 5*time.Second, true)
	err := probeOnce(g, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "answered in HTTP/1.1") {
		t.Fatalf("probe of an HTTP/1.1 backend: %v; want a failure saying it answered in HTTP/1.1", err)
	}
	if g.holds() {
		t.Fatal("a failed check kept its connection")
	}
}

// TestGRPCProbeSilentBackend: a backend that accepts and never answers
// fails within the check's timeout.
func TestGRPCProbeSilentBackend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	for _, keep := range []bool{false, true} {
		g := newGRPCCheck(newBackend(t, "http://"+ln.Addr().String()), "", 300*time.Millisecond, keep)
		start := time.Now()
		err := probeOnce(g, 300*time.Millisecond)
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
			t.Fatalf("keep %v: probe of a silent backend: %v; want a deadline failure", keep, err)
		}
		if took > 2*time.Second {
			t.Fatalf("keep %v: the probe took %v with a 300ms timeout", keep, took)
		}
		if g.holds() {
			t.Fatalf("keep %v: a failed check kept its connection", keep)
		}
	}
}

// TestGRPCCheckerFallsAndRises runs a checker of gRPC checks against a
// real server: NOT_SERVING takes the backend out after fall failures, with
// the status as the reason, and SERVING brings it back after rise passes.
// The kept connection holds its descriptor's place until Stop.
func TestGRPCCheckerFallsAndRises(t *testing.T) {
	s, b := grpcServer(t, false)
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	var tr transitions
	logs := &logRecords{}
	budget := fds.New(10)
	cfg := Config{Type: TypeGRPC, Interval: 30 * time.Millisecond, Timeout: 2 * time.Second, Rise: 2, Fall: 3, ReuseConnection: true}
	c, err := New(cfg, []*backend.Backend{b}, tr.onChange, WithLogger(slog.New(logs)), WithDescriptors(budget))
	if err != nil {
		t.Fatal(err)
	}
	c.CheckAll(context.Background())
	if !b.Healthy() {
		t.Fatal("a SERVING backend is down after the first check")
	}
	if budget.Used() != 1 {
		t.Fatalf("the kept connection holds %d places, want 1", budget.Used())
	}
	c.Run(context.Background())
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	waitUntil(t, "the backend to go down", func() bool { return !b.Healthy() })
	s.Health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	waitUntil(t, "the backend to come back", func() bool { return b.Healthy() })
	c.Stop()
	if got := tr.list(); len(got) != 2 || got[0] || !got[1] {
		t.Fatalf("transitions %v, want [false true]", got)
	}
	var down, up map[string]string
	for _, r := range logs.all() {
		switch r.Message {
		case "backend down":
			down = attrs(r)
		case "backend up":
			up = attrs(r)
		}
	}
	if !strings.Contains(down["reason"], "status NOT_SERVING") || down["consecutive_failures"] != "3" {
		t.Errorf("backend down logged %v; want reason status NOT_SERVING after 3 failures", down)
	}
	if up["reason"] != "2 consecutive checks passed" {
		t.Errorf("backend up logged %v; want 2 consecutive passes", up)
	}
	if budget.Used() != 0 {
		t.Fatalf("after Stop %d places are held, want 0", budget.Used())
	}
}

// http1Answer is what an HTTP/1.1 server answers to relay's HTTP/2
// preface, which it reads as a request it cannot serve.
const http1Answer = "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request"

// http1Backend accepts connections on a loopback port and answers each in
// HTTP/1.1 once relay's preface and SETTINGS are in. With reset it then
// closes the connection with a reset, as a server that closes with bytes
// unread does; without, it holds the connection open until the test ends.
// answered receives once per connection, after the answer (and the reset)
// went out.
func http1Backend(t *testing.T, reset bool) (addr string, answered <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	done := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			preface := make([]byte, len(http2.ClientPreface))
			if _, err := io.ReadFull(c, preface); err != nil {
				continue
			}
			if _, err := http2.NewFramer(nil, c).ReadFrame(); err != nil {
				continue
			}
			c.Write([]byte(http1Answer))
			if reset {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
			done <- struct{}{}
		}
	}()
	return ln.Addr().String(), done
}

// waitAnswered waits for an answer of http1Backend, for at most 10 s.
func waitAnswered(t *testing.T, answered <-chan struct{}) {
	t.Helper()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the backend did not answer relay's preface")
	}
}

// TestGRPCProbeHTTP1AnswerBeforeItsStream: the connection's reading
// goroutine has read the HTTP/1.1 answer and given the connection up
// before the check opens its stream, so the connection takes none. The
// failure still says the backend answered in HTTP/1.1.
func TestGRPCProbeHTTP1AnswerBeforeItsStream(t *testing.T) {
	addr, answered := http1Backend(t, false)
	g := newGRPCCheck(newBackend(t, "http://"+addr), "", 5*time.Second, true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := g.dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitAnswered(t, answered)
	waitUntil(t, "relay to give the connection up", func() bool { return !c.c.Usable() })
	err = g.ask(ctx, c, false)
	if err == nil || !strings.Contains(err.Error(), "answered in HTTP/1.1") {
		t.Fatalf("check on a connection given up before its stream: %v; want a failure saying the backend answered in HTTP/1.1", err)
	}
	if g.holds() {
		t.Fatal("a failed check kept its connection")
	}
}

// heldReads holds back reads from its connection until it is released or
// closed: the backend's bytes are there, and relay's reading goroutine has
// not yet been run to read them.
type heldReads struct {
	net.Conn
	open chan struct{}
	once sync.Once
}

func (h *heldReads) release() { h.once.Do(func() { close(h.open) }) }

func (h *heldReads) Read(p []byte) (int, error) {
	<-h.open
	return h.Conn.Read(p)
}

// Close closes the connection before it lets the reads go: what the
// backend sent and was not read is lost, as it is with a real socket.
func (h *heldReads) Close() error {
	err := h.Conn.Close()
	h.release()
	return err
}

// TestGRPCProbeHTTP1AnswerAndResetBeforeItsRequest: the backend answered
// in HTTP/1.1 and reset the connection before the check's request went
// out, and relay's reading goroutine has not yet read the answer. A write
// of the request would fail and close the socket with the answer unread;
// the failure must still say the backend answered in HTTP/1.1.
func TestGRPCProbeHTTP1AnswerAndResetBeforeItsRequest(t *testing.T) {
	addr, answered := http1Backend(t, true)
	g := newGRPCCheck(newBackend(t, "http://"+addr), "", 5*time.Second, true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	held := &heldReads{Conn: raw, open: make(chan struct{})}
	c := &grpcConn{sniff: newSniffConn(held)}
	if c.c, err = h2up.Start(c.sniff, h2up.Options{Name: addr, MaxStreams: 1}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.c.Close() })
	waitAnswered(t, answered)
	// The reads are let go a while after the check began, if nothing
	// closed the connection before.
	time.AfterFunc(50*time.Millisecond, held.release)
	err = g.ask(ctx, c, false)
	if err == nil || !strings.Contains(err.Error(), "answered in HTTP/1.1") {
		t.Fatalf("check after the backend's answer and reset: %v; want a failure saying the backend answered in HTTP/1.1", err)
	}
	if g.holds() {
		t.Fatal("a failed check kept its connection")
	}
}

// TestGRPCProbeBackendAllowingNoStream: a backend whose SETTINGS allow no
// stream fails the check on a new connection, saying so.
func TestGRPCProbeBackendAllowingNoStream(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fr := http2.NewFramer(c, c)
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(c, preface); err != nil {
			return
		}
		fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0})
		for {
			if _, err := fr.ReadFrame(); err != nil {
				return
			}
		}
	}()
	g := newGRPCCheck(newBackend(t, "http://"+ln.Addr().String()), "", 5*time.Second, true)
	err = probeOnce(g, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "took no stream: the backend allows no stream") {
		t.Fatalf("probe of a backend allowing no stream: %v; want a failure saying it allows none", err)
	}
	if g.holds() {
		t.Fatal("a failed check kept its connection")
	}
}
