package health

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/rawio"
)

// keepServer is a raw HTTP/1.1 server over TCP on 127.0.0.1 for the tests of
// kept probe connections. On each connection it reads request heads one at a
// time and has answer reply; answer returns false to close the connection.
type keepServer struct {
	addr   string
	conns  atomic.Int64  // connections accepted
	reqs   chan []byte   // every request head, in order
	closed chan struct{} // one value per connection, once the server has closed it
}

func serveKeep(t *testing.T, answer func(c net.Conn, conn, req int) bool) *keepServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &keepServer{addr: ln.Addr().String(), reqs: make(chan []byte, 100), closed: make(chan struct{}, 100)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conn := int(s.conns.Add(1))
			go func() {
				defer func() {
					c.Close()
					s.closed <- struct{}{}
				}()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				for req := 1; ; req++ {
					head := readHead(c)
					if head == nil {
						return
					}
					s.reqs <- head
					if !answer(c, conn, req) {
						return
					}
				}
			}()
		}
	}()
	return s
}

// probeN runs n probes of h one after another, each under its own timeout,
// and returns their results.
func probeN(h *httpCheck, n int, timeout time.Duration) []error {
	errs := make([]error, n)
	for i := range errs {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		errs[i] = h.probe(ctx)
		cancel()
	}
	return errs
}

// TestHTTPProbeKeepsConnection checks which answers leave the connection fit
// for the next probe: only one whose end the probe knows exactly and after
// which the backend has not said it will close.
func TestHTTPProbeKeepsConnection(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		close  bool // the server closes after answering, as the answer says it will
		conns  int  // connections used by 3 probes
	}{
		{name: "Content-Length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n", conns: 1},
		{name: "chunked", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nok\n\r\n0\r\n\r\n", conns: 1},
		{name: "204 without a length", answer: "HTTP/1.1 204 No Content\r\n\r\n", conns: 1},
		{name: "interim then final", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", conns: 1},
		{name: "Connection: close", answer: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n", close: true, conns: 3},
		{name: "Connection: close among other tokens", answer: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nconnection: x-foo, Close\r\n\r\n", close: true, conns: 3},
		{name: "HTTP/1.0", answer: "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n", close: true, conns: 3},
		{name: "no length: ends at close", answer: "HTTP/1.1 200 OK\r\n\r\nok\n", close: true, conns: 3},
		{name: "bytes after the end", answer: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\nHTTP/1.1 200 OK\r\n", conns: 3},
		{name: "a body beyond maxDrain", answer: "HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat("x", 70000), conns: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serveKeep(t, func(c net.Conn, _, _ int) bool {
				c.Write([]byte(tt.answer))
				return !tt.close
			})
			h := newHTTPCheck(newBackend(t, "http://"+srv.addr), "/health", true, newReadBufs())
			defer h.closeIdle()
			for i, err := range probeN(h, 3, 10*time.Second) {
				if err != nil {
					t.Fatalf("probe %d: %v", i+1, err)
				}
			}
			if n := srv.conns.Load(); n != int64(tt.conns) {
				t.Errorf("3 probes used %d connections, want %d", n, tt.conns)
			}
			for range 3 {
				if head := <-srv.reqs; bytes.Contains(bytes.ToLower(head), []byte("connection:")) {
					t.Errorf("a probe meant to keep its connection sent %q", head)
				}
			}
		})
	}
}

// TestHTTPProbeRetriesAClosedKeptConnection has the backend close each
// connection after one answer, as one whose keep-alive timeout is shorter
// than the check interval does: every probe must still pass, on a new
// connection, whether the close was a FIN or a reset.
func TestHTTPProbeRetriesAClosedKeptConnection(t *testing.T) {
	for _, reset := range []bool{false, true} {
		name := map[bool]string{false: "FIN", true: "reset"}[reset]
		t.Run(name, func(t *testing.T) {
			srv := serveKeep(t, func(c net.Conn, _, _ int) bool {
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
				if reset {
					c.(*net.TCPConn).SetLinger(0)
				}
				return false
			})
			h := newHTTPCheck(newBackend(t, "http://"+srv.addr), "/health", true, newReadBufs())
			defer h.closeIdle()
			for i := range 4 {
				if err := probeN(h, 1, 10*time.Second)[0]; err != nil {
					t.Fatalf("probe %d: %v", i+1, err)
				}
				select { // the kept connection is closed before the next probe
				case <-srv.closed:
				case <-time.After(5 * time.Second):
					t.Fatal("the server did not close its connection")
				}
			}
			if n := srv.conns.Load(); n != 4 {
				t.Errorf("4 probes used %d connections, want 4", n)
			}
		})
	}
}

// TestHTTPProbeRetriesOnce checks that the retry on a new connection is the
// only one: when the new connection also ends without an answer, the probe
// fails.
func TestHTTPProbeRetriesOnce(t *testing.T) {
	srv := serveKeep(t, func(c net.Conn, conn, _ int) bool {
		if conn == 1 {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		}
		return false // close the first after its answer, the others at once
	})
	h := newHTTPCheck(newBackend(t, "http://"+srv.addr), "/health", true, newReadBufs())
	defer h.closeIdle()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.probe(ctx); err != nil {
		t.Fatalf("first probe: %v", err)
	}
	select {
	case <-srv.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not close the first connection")
	}
	err := h.probe(ctx)
	if err == nil || !strings.Contains(err.Error(), "reading response head: unexpected EOF") {
		t.Fatalf("second probe returned %v, want the new connection's end of stream", err)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("2 probes used %d connections, want 2 (one retry)", n)
	}
}

// TestHTTPProbeKeptConnectionTimesOut checks that a kept connection whose
// backend stops answering fails the probe at its timeout, without a retry.
func TestHTTPProbeKeptConnectionTimesOut(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := serveKeep(t, func(c net.Conn, _, req int) bool {
		if req > 1 {
			<-release
			return false
		}
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		return true
	})
	h := newHTTPCheck(newBackend(t, "http://"+srv.addr), "/health", true, newReadBufs())
	defer h.closeIdle()
	errs := probeN(h, 2, 300*time.Millisecond)
	if errs[0] != nil {
		t.Fatalf("first probe: %v", errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "deadline exceeded") {
		t.Fatalf("second probe returned %v, want a timeout", errs[1])
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("probes used %d connections, want 1 (no retry after a timeout)", n)
	}
}

// TestStopClosesKeptConnections checks that a Checker's Stop closes the
// connections its probes kept.
func TestStopClosesKeptConnections(t *testing.T) {
	srv := serveKeep(t, func(c net.Conn, _, _ int) bool {
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		return true
	})
	bs := []*backend.Backend{newBackend(t, "http://"+srv.addr), newBackend(t, "http://"+srv.addr)}
	bs[1].Name += "#2" // the checker tells backends apart by name
	c, err := New(Config{Interval: time.Hour, Timeout: 5 * time.Second, Rise: 1, Fall: 1, ReuseConnection: true}, bs, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.CheckAll(context.Background())
	for _, b := range bs {
		if !b.Healthy() {
			t.Fatalf("%s failed its check", b)
		}
	}
	if n := srv.conns.Load(); n != 2 {
		t.Fatalf("%d connections for 2 backends, want 2", n)
	}
	select {
	case <-srv.closed:
		t.Fatal("a kept connection closed before Stop")
	case <-time.After(100 * time.Millisecond):
	}
	c.Stop()
	for range 2 {
		select {
		case <-srv.closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Stop left a kept connection open")
		}
	}
}

// TestHTTPProbeReplacesANoisyKeptConnection has the backend send a 408 on
// the idle connection before closing it, as some servers do when their
// keep-alive timeout runs out: the next probe must not read that as its
// answer, whether it arrived while idle or in reply to the probe.
func TestHTTPProbeReplacesANoisyKeptConnection(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	const timedOut = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
	t.Run("while idle", func(t *testing.T) {
		srv := serveKeep(t, func(c net.Conn, _, _ int) bool {
			c.Write([]byte(ok))
			time.Sleep(50 * time.Millisecond)
			c.Write([]byte(timedOut))
			return false
		})
		h := newHTTPCheck(newBackend(t, "http://"+srv.addr), "/health", true, newReadBufs())
		defer h.closeIdle()
		for i := range 3 {
			if err := probeN(h, 1, 10*time.Second)[0]; err != nil {
				t.Fatalf("probe %d: %v", i+1, err)
			}
			<-srv.closed // the 408 and the close have been sent
		}
		if n := srv.conns.Load(); n != 3 {
			t.Errorf("3 probes used %d connections, want 3", n)
		}
	})
	t.Run("stray bytes while idle", func(t *testing.T) {
		strayed := make(chan struct{}, 3)
		srv := serveKeep(t, func(c net.Conn, _, _ int) bool {
			c.Write([]byte(ok))
			time.Sleep(50 * time.Millisecond)
			c.Write([]byte("stray"))
			strayed <- struct{}{}
			return true
		})
		h := newHTTPCheck(newBackend(t, "http://"+srv.addr), "/health", true, newReadBufs())
		defer h.closeIdle()
		for i := range 3 {
			if err := probeN(h, 1, 10*time.Second)[0]; err != nil {
				t.Fatalf("probe %d: %v", i+1, err)
			}
			<-strayed
			time.Sleep(20 * time.Millisecond) // loopback delivery of what was written
		}
		if n := srv.conns.Load(); n != 3 {
			t.Errorf("3 probes used %d connections, want 3", n)
		}
	})
	t.Run("in reply", func(t *testing.T) {
		srv := serveKeep(t, func(c net.Conn, _, req int) bool {
			if req == 1 {
				c.Write([]byte(ok))
				return true
			}
			c.Write([]byte(timedOut))
			return false
		})
		h := newHTTPCheck(newBackend(t, "http://"+srv.addr), "/health", true, newReadBufs())
		defer h.closeIdle()
		for i, err := range probeN(h, 3, 10*time.Second) {
			if err != nil {
				t.Fatalf("probe %d: %v", i+1, err)
			}
		}
		// 1: kept; 2: 408 on it, retried on a new one (kept); 3: 408, new.
		if n := srv.conns.Load(); n != 3 {
			t.Errorf("3 probes used %d connections, want 3", n)
		}
	})
}

// TestHTTPProbeDropsALongIdleConnection checks that a connection idle for
// longer than maxKeptIdle is not used: something on the way may have
// forgotten it.
func TestHTTPProbeDropsALongIdleConnection(t *testing.T) {
	srv := serveKeep(t, func(c net.Conn, _, _ int) bool {
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		return true
	})
	h := newHTTPCheck(newBackend(t, "http://"+srv.addr), "/health", true, newReadBufs())
	defer h.closeIdle()
	if err := probeN(h, 1, 10*time.Second)[0]; err != nil {
		t.Fatal(err)
	}
	c := h.idle.Load()
	if c == nil {
		t.Fatal("the first probe kept no connection")
	}
	c.idleSince = c.idleSince.Add(-maxKeptIdle - time.Second)
	if err := probeN(h, 1, 10*time.Second)[0]; err != nil {
		t.Fatal(err)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("probes used %d connections, want a new one after the long idle", n)
	}
}

// TestHTTPSProbeKeepsItsConnection probes an https backend whose certificate
// the probe trusts: the answer is read through TLS, the connection is kept,
// and when the server closes it the probe sees that through TLS (the socket
// underneath is peeked) and opens a new one rather than failing.
func TestHTTPSProbeKeepsItsConnection(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	b := newBackend(t, srv.URL)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	b.SetTLS(&tls.Config{ServerName: "127.0.0.1", RootCAs: roots})
	h := newHTTPCheck(b, "/health", true, newReadBufs())
	defer h.closeIdle()
	for i, err := range probeN(h, 3, 5*time.Second) {
		if err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("three probes used %d connections, want one kept", n)
	}
	srv.CloseClientConnections()
	waitUntil(t, "the server's close to reach the kept connection", func() bool {
		c := h.idle.Load()
		return c != nil && !rawio.Quiet(c.conn)
	})
	if err := probeN(h, 1, 5*time.Second)[0]; err != nil {
		t.Fatalf("probe after the server closed the kept connection: %v", err)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections after the server closed the first, want 2", n)
	}
}
