package h2

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/core"
	"relay/internal/testaddr"
)

// ioTimeout bounds every wait in these tests: a socket deadline, a
// client's timeout, a wait for a backend to see something.
const ioTimeout = 10 * time.Second

// newBackend starts an HTTP/1.1 backend named name and returns it as a
// relay backend. With h nil it answers with what it saw of the request.
func newBackend(t *testing.T, name string, h http.HandlerFunc) *backend.Backend {
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

func backendAt(t *testing.T, raw string) *backend.Backend {
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
	d := config.Default()
	c := core.New(core.Config{})
	if _, err := c.AddPool(core.PoolConfig{
		Name: "default", Algorithm: "round-robin", Retries: d.Retries,
		ConnectTimeout: d.ConnectTimeout, ResponseTimeout: d.ResponseTimeout,
		MaxIdlePerBackend: d.MaxIdleConnsPerBackend, IdleTimeout: d.UpstreamIdleTimeout,
	}, bs); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(c, bt, lim, nil)
	var served sync.WaitGroup
	served.Add(1)
	go func() {
		defer served.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
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
