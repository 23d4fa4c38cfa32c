//go:build linux

package proxy

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
)

// tcpForwarder relays every connection it accepts to target, byte for
// byte: a proxy that knows nothing of HTTP, so relay's address check
// cannot see through it.
func tcpForwarder(t *testing.T, target string) string {
	t.Helper()
	ln := listen(t)
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil {
			c.Close()
			return false
		}
		conns[c] = true
		return true
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !track(c) {
				return
			}
			wg.Go(func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil || !track(up) {
					return
				}
				defer up.Close()
				go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, up)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// serveOn is startRelayExactly on a listener the test made first.
func serveOn(t *testing.T, ln *countingListener, cfg Config, bs ...*backend.Backend) *testRelay {
	t.Helper()
	p, err := build(cfg, bs)
	if err != nil {
		t.Fatal(err)
	}
	r := &testRelay{p: p, ln: ln, addr: ln.Addr().String(), url: "http://" + ln.Addr().String(), served: make(chan error, 1)}
	go func() { r.served <- p.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Shutdown(ctx)
		r.serveResult(t)
	})
	return r
}

// TestLoopThroughAnotherProxyIsAnswered508: relay's backend is a plain
// TCP forwarder back to relay itself, which no address check can see.
// Each request comes back once carrying relay's Via entry and is
// answered 508 at once; the descriptors in use stay bounded.
func TestLoopThroughAnotherProxyIsAnswered508(t *testing.T) {
	ln := listen(t)
	fwd := tcpForwarder(t, ln.Addr().String())
	cfg := withDefaults(Config{})
	cfg.Pool.ResponseTimeout = 3 * time.Second
	r := serveOn(t, ln, cfg, newBackendFor(t, fwd, 1))

	c, br := dialRelay(t, r)
	defer c.Close()
	write(t, c, "GET /warm HTTP/1.1\r\nHost: a.test\r\n\r\n")
	readResponse(t, br, "GET")
	before := openFiles(t)
	const n = 20
	for i := range n {
		start := time.Now()
		write(t, c, "GET /loop HTTP/1.1\r\nHost: a.test\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if took := time.Since(start); resp.StatusCode != 508 || took > time.Second {
			t.Fatalf("request %d: %s %q after %v; want 508 Loop Detected at once", i, resp.Status, body, took)
		}
	}
	// The loop's chain is one connection from relay to the forwarder,
	// the forwarder's two ends and relay's side of the way back; each
	// request reuses it.
	if after := openFiles(t); after > before+4 {
		t.Errorf("%d requests took descriptors from %d to %d", n, before, after)
	}
}
