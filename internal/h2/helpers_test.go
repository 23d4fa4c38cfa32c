package h2

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/core"
	"relay/internal/fds"
	"relay/internal/testaddr"
)

// ioTimeout bounds every wait in these tests: a socket deadline, a
// client's timeout, a wait for a backend to see something.
const ioTimeout = 10 * time.Second

// newBackend starts an HTTP/1.1 backend named name and returns it as a
// relay backend. With h nil it answers with what it saw of the request.
func newBackend(t testing.TB, name string, h http.HandlerFunc) *backend.Backend {
	t.Helper()
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Backend", name)
			fmt.Fprintf(w, "%s %s %s xff=%s proto=%s", name, r.Method, r.URL.RequestURI(),
				r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"))
		}
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return backendAt(t, s.URL)
}

func backendAt(t testing.TB, raw string) *backend.Backend {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.New(u, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deadBackend is a backend whose address refuses connections.
func deadBackend(t *testing.T) *backend.Backend {
	t.Helper()
	return backendAt(t, "http://"+testaddr.Refused(t))
}

// rawBackend is a backend that writes whatever bytes answer wants for
// each request it reads, for responses Go's server would not send.
func rawBackend(t *testing.T, answer func(w *bufio.Writer, req *http.Request)) *backend.Backend {
	t.Helper()
	return connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		bw := bufio.NewWriter(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			answer(bw, req)
			if bw.Flush() != nil {
				return
			}
		}
	})
}

// connBackend is a backend on a loopback listener that serves each
// connection with serve, within ioTimeout; the connections are closed
// when the test ends.
func connBackend(t *testing.T, serve func(c net.Conn)) *backend.Backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(ioTimeout))
				serve(c)
			}()
		}
	}()
	return backendAt(t, "http://"+ln.Addr().String())
}

// front is relay's HTTP/2 server on a loopback listener.
type front struct {
	addr string // host:port
	url  string // http://host:port
	srv  *Server
	core *core.Core
}

// idleRunners counts the runners waiting for streams on the front's
// connections.
func (f *front) idleRunners() int {
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	n := 0
	for c := range f.srv.conns {
		n += int(c.idle.Load())
	}
	return n
}

// testBodyTime is the clients' time to send a request body.
var testBodyTime = core.BodyTime{Idle: ioTimeout}

// testLimits are the limits tests start from.
func testLimits() Limits {
	return Limits{MaxConcurrentStreams: 100, MaxHeaderBytes: 64 << 10, IdleTimeout: time.Minute, HeaderTimeout: ioTimeout}
}

// startFront serves bs over HTTP/2 with the test limits.
func startFront(t *testing.T, bs ...*backend.Backend) *front {
	t.Helper()
	return startFrontWith(t, testBodyTime, testLimits(), bs...)
}

// startFrontWith builds a core whose default pool holds bs, as relay
// does from its default configuration, and serves it with an h2 Server
// on a real loopback socket. Cleanup shuts the server down and checks
// that every connection ended.
func startFrontWith(t *testing.T, bt core.BodyTime, lim Limits, bs ...*backend.Backend) *front {
	t.Helper()
	return startFrontOpts(t, bt, lim, frontOptions{}, bs...)
}

// frontOptions are what a test may change of the front startFrontOpts
// builds.
type frontOptions struct {
	// pool changes the default pool's configuration.
	pool func(*core.PoolConfig)
	// wrap stands in for each accepted connection before relay serves
	// it, to watch or hold what relay writes.
	wrap func(net.Conn) net.Conn
	// descriptors is the core's budget of file descriptors.
	descriptors *fds.Budget
	// log receives the server's log (none if nil).
	log *slog.Logger
	// core changes the core's configuration.
	core func(*core.Config)
}

// startFrontOpts is startFrontWith with the changes in o.
func startFrontOpts(t testing.TB, bt core.BodyTime, lim Limits, o frontOptions, bs ...*backend.Backend) *front {
	t.Helper()
	d := config.Default()
	cc := core.Config{Descriptors: o.descriptors}
	if o.core != nil {
		o.core(&cc)
	}
	c := core.New(cc)
	pc := core.PoolConfig{
		Name: "default", Algorithm: "round-robin", Retries: d.Retries,
		ConnectTimeout: d.ConnectTimeout, ResponseTimeout: d.ResponseTimeout,
		MaxIdlePerBackend: d.MaxIdleConnsPerBackend, IdleTimeout: d.UpstreamIdleTimeout,
	}
	if o.pool != nil {
		o.pool(&pc)
	}
	if _, err := c.AddPool(pc, bs); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(c, bt, lim, o.log)
	var served sync.WaitGroup
	served.Add(1)
	go func() {
		defer served.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			if o.wrap != nil {
				nc = o.wrap(nc)
			}
			served.Add(1)
			go srv.ServeConn(nc, served.Done)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		c.CloseIdle()
		if !waitGroup(&served, ioTimeout) {
			t.Errorf("connections still served %v after shutdown", ioTimeout)
		}
	})
	return &front{addr: ln.Addr().String(), url: "http://" + ln.Addr().String(), srv: srv, core: c}
}

// waitGroup waits for wg for up to d and reports whether it was done.
func waitGroup(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// h2Client is Go's HTTP client speaking HTTP/2 without TLS, with prior
// knowledge (h2c).
func h2Client(t *testing.T) *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: ioTimeout}
}

// await waits for a value on ch for up to ioTimeout; what names it in a
// failure.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(ioTimeout):
		t.Fatalf("%s: nothing after %v", what, ioTimeout)
		panic("unreachable")
	}
}

// serverConn returns relay's one connection on f. Call it once relay has
// answered something on that connection, so that it is registered.
func serverConn(t *testing.T, f *front) *conn {
	t.Helper()
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	if len(f.srv.conns) != 1 {
		t.Fatalf("relay serves %d connections, want 1", len(f.srv.conns))
	}
	for c := range f.srv.conns {
		return c
	}
	return nil
}

// waitUntil polls cond until it holds, for up to ioTimeout: for a state
// inside relay that no frame or socket event shows.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, ioTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// gatedConn is relay's side of a client's connection, whose writes a
// test may hold as a client's full socket holds them: while the gate is
// shut, relay's writes wait at it, and blocked learns of the first.
type gatedConn struct {
	net.Conn
	mu      sync.Mutex
	open    chan struct{} // closed while writes pass
	blocked chan struct{}
}

func newGatedConn(nc net.Conn) *gatedConn {
	g := &gatedConn{Conn: nc, open: make(chan struct{}), blocked: make(chan struct{}, 1)}
	close(g.open)
	return g
}

// shut holds the writes that come from now on.
func (g *gatedConn) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

// reopen lets the held writes, and the later ones, through.
func (g *gatedConn) reopen() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *gatedConn) Write(p []byte) (int, error) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	default:
		select {
		case g.blocked <- struct{}{}:
		default:
		}
		select {
		case <-open:
		case <-time.After(ioTimeout):
			return 0, os.ErrDeadlineExceeded
		}
	}
	return g.Conn.Write(p)
}
