package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// On a kept-alive connection, a later request head gets
// client_header_timeout from its first byte, not the idle timeout.
func TestLaterHeadsGetTheHeaderTimeout(t *testing.T) {
	hb := newHTTPBackend(t, "a", 1, nil)
	r := startRelay(t, Config{HeaderTimeout: 300 * time.Millisecond, IdleTimeout: 10 * time.Second}, hb.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET /first HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	time.Sleep(500 * time.Millisecond) // idle longer than the header timeout: fine
	write(t, c, "GET /second HTTP/1.1\r\n")
	start := time.Now()
	resp, _ := readResponse(t, br, "GET")
	if d := time.Since(start); resp.StatusCode != 408 || d > 2*time.Second {
		t.Fatalf("dribbled second head: %d after %v, want 408 after about 300ms", resp.StatusCode, d)
	}
	expectClosed(t, c, br)
}

// A body held whole before a backend is picked: a slow client holds no
// backend connection, and when it is too slow it gets 408 within the body
// timeout, nothing having reached a backend.
func TestSlowHeldBodyHoldsNoBackendAndGets408(t *testing.T) {
	hb := newHTTPBackend(t, "a", 1, nil)
	cfg := withDefaults(Config{BodyTimeout: 400 * time.Millisecond, BodyMinRate: 1000})
	r := startRelayExactly(t, cfg, hb.b)
	c, br := dialRelay(t, r)
	write(t, c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	start := time.Now()
	go drip(c, 100, 50*time.Millisecond)
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	// 400ms plus a millisecond per byte received (1000 B/s): about 410ms.
	if resp.StatusCode != 408 || d < 350*time.Millisecond || d > 1500*time.Millisecond {
		t.Errorf("slow body: %d after %v, want 408 after about 410ms", resp.StatusCode, d)
	}
	if n := hb.ln.accepts.Load(); n != 0 {
		t.Errorf("the backend got %d connections for a body still arriving", n)
	}
}

// A streamed body (longer than body_buffer_bytes) that arrives too slowly
// is cut off within the body timeout, and so is the backend connection it
// held.
func TestSlowStreamedBodyIsCutOffWithItsBackendConnection(t *testing.T) {
	closed := make(chan time.Time, 1)
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		readHead(br)
		io.Copy(io.Discard, br)
		closed <- time.Now()
	})
	cfg := withDefaults(Config{BodyTimeout: 300 * time.Millisecond, BodyMinRate: 1000, BodyBufferBytes: 10})
	r := startRelayExactly(t, cfg, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
	start := time.Now()
	go drip(c, 200, 20*time.Millisecond)
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 408 {
		t.Errorf("slow streamed body: %d, want 408", resp.StatusCode)
	}
	select {
	case at := <-closed:
		if d := at.Sub(start); d > 1500*time.Millisecond {
			t.Errorf("the backend connection was closed %v after the head, want about 330ms", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the backend connection was not closed")
	}
}

// max_body_bytes: a longer Content-Length gets 413 before anything goes
// upstream; a chunked body that passes it is cut off with 413, its backend
// connection closed and nothing retried.
func TestMaxBodyBytes(t *testing.T) {
	got := make(chan string, 4)
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		req, err := rb.next(br)
		if err != nil {
			got <- "cut off: " + err.Error()
			return
		}
		got <- "whole: " + string(req.Body)
		// The connection ends with this answer: relay must not keep it
		// for the next request, which must reach a connection of its
		// own, and a handler that sees it cut off.
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
	})
	r := startRelay(t, Config{MaxBodyBytes: 10}, rb.b)
	backendGot := func() string {
		t.Helper()
		select {
		case g := <-got:
			return g
		case <-time.After(ioTimeout):
			t.Fatal("the backend read no request")
			return ""
		}
	}

	c, br := dialRelay(t, r)
	write(t, c, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n01234567890")
	if resp, body := readResponse(t, br, "POST"); resp.StatusCode != 413 || !strings.Contains(body, "larger than 10 bytes") {
		t.Errorf("Content-Length 11: %d %q, want 413 naming the limit", resp.StatusCode, body)
	}
	if n := rb.ln.accepts.Load(); n != 0 {
		t.Errorf("a refused body reached the backend (%d connections)", n)
	}

	c, br = dialRelay(t, r)
	write(t, c, "POST /ok HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	if resp, _ := readResponse(t, br, "POST"); resp.StatusCode != 200 {
		t.Errorf("chunked body under the limit: %d", resp.StatusCode)
	}
	if g := backendGot(); g != "whole: hello" {
		t.Errorf("backend got %q", g)
	}

	c, br = dialRelay(t, r)
	write(t, c, "POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello \r\n6\r\nworld!\r\n0\r\n\r\n")
	if resp, body := readResponse(t, br, "POST"); resp.StatusCode != 413 || !strings.Contains(body, "larger than 10 bytes") {
		t.Errorf("chunked body past the limit: %d %q, want 413", resp.StatusCode, body)
	}
	if g := backendGot(); !strings.HasPrefix(g, "cut off") {
		t.Errorf("backend got %q, want its request cut off", g)
	}
	time.Sleep(50 * time.Millisecond)
	if n := rb.hits.Load(); n != 1 {
		t.Errorf("backend read %d whole requests, want 1 (nothing retried)", n)
	}
}

// A body held whole is sent again, intact, when a request fails in a way
// that may be retried: a POST whose first backend refuses the connection,
// and a PUT (idempotent) whose first backend drops the connection after
// reading part of it. 1 MiB each, with body_buffer_bytes 2 MiB.
func TestHeldBodyIsReplayedIntactOnRetry(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	want := sha256.Sum256(body)
	sums := make(chan [32]byte, 4)
	good := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		req, err := rb.next(br)
		if err != nil {
			return
		}
		sums <- sha256.Sum256(req.Body)
		c.Write([]byte(okResponse("stored")))
	})
	dropper := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		readHead(br)
		io.CopyN(io.Discard, br, 4096)
		c.(*net.TCPConn).SetLinger(0)
	})
	for _, tt := range []struct {
		method string
		first  string
	}{
		{"POST", deadAddr(t)},
		{"PUT", dropper.ln.Addr().String()},
	} {
		t.Run(tt.method, func(t *testing.T) {
			cfg := withDefaults(Config{BodyBufferBytes: 2 << 20})
			cfg.Pool.Retries = 1
			cfg.Pool.Algorithm = "round-robin"
			r := startRelayExactly(t, cfg, newBackendFor(t, tt.first, 1), good.b)
			c, br := dialRelay(t, r)
			write(t, c, tt.method+" /store HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n")
			if _, err := c.Write(body); err != nil {
				t.Fatal(err)
			}
			resp, text := readResponse(t, br, tt.method)
			if resp.StatusCode != 200 || text != "stored" {
				t.Fatalf("%s: %d %q, want the retry to reach the good backend", tt.method, resp.StatusCode, text)
			}
			if got := <-sums; got != want {
				t.Errorf("%s: the body the good backend got differs from the one sent", tt.method)
			}
		})
	}
}

// drip writes n bytes to c one at a time, every apart, until a write fails.
func drip(c net.Conn, n int, every time.Duration) {
	for range n {
		if _, err := c.Write([]byte("x")); err != nil {
			return
		}
		time.Sleep(every)
	}
}
