package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/core"
)

// hiddenConn hides a TCP connection's socket, as a connection layered over
// TCP (TLS, a tunnel) does: relay must use its Read and Write.
type hiddenConn struct{ inner net.Conn }

func (h *hiddenConn) Read(p []byte) (int, error)         { return h.inner.Read(p) }
func (h *hiddenConn) Write(p []byte) (int, error)        { return h.inner.Write(p) }
func (h *hiddenConn) Close() error                       { return h.inner.Close() }
func (h *hiddenConn) LocalAddr() net.Addr                { return h.inner.LocalAddr() }
func (h *hiddenConn) RemoteAddr() net.Addr               { return h.inner.RemoteAddr() }
func (h *hiddenConn) SetDeadline(t time.Time) error      { return h.inner.SetDeadline(t) }
func (h *hiddenConn) SetReadDeadline(t time.Time) error  { return h.inner.SetReadDeadline(t) }
func (h *hiddenConn) SetWriteDeadline(t time.Time) error { return h.inner.SetWriteDeadline(t) }

// wrappedConn is a hiddenConn that names the connection it wraps, as
// crypto/tls.Conn does with NetConn.
type wrappedConn struct{ hiddenConn }

func (w *wrappedConn) NetConn() net.Conn { return w.inner }

// TestUpstreamsThatAreNotRawSockets forwards over upstream connections that
// are not raw sockets, the path a TLS upstream takes: requests and bodies
// go through the connection's own Read and Write, connections are pooled,
// and before a POST goes out on a pooled one relay checks it is still open
// by peeking at the socket underneath. When there is no socket to peek at,
// the POST gets a new connection instead of risking a closed one.
func TestUpstreamsThatAreNotRawSockets(t *testing.T) {
	for _, tt := range []struct {
		name string
		wrap func(net.Conn) net.Conn
		// connections the backend sees for GET, GET, POST, POST on one
		// client connection
		conns int64
	}{
		{"wrapping a socket", func(c net.Conn) net.Conn { return &wrappedConn{hiddenConn{c}} }, 1},
		{"no socket to peek at", func(c net.Conn) net.Conn { return &hiddenConn{c} }, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
				for {
					req, err := rb.next(br)
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, okResponse(req.Method+" "+req.Target+" "+string(req.Body))); err != nil {
						return
					}
				}
			})
			cfg := withDefaults(Config{Pool: core.PoolConfig{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return tt.wrap(c), nil
			}}})
			r := startRelay(t, cfg, rb.b)
			c, br := dialRelay(t, r)
			for i, req := range []string{
				"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
				"GET /b HTTP/1.1\r\nHost: x\r\n\r\n",
				"POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody",
				"POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nmore",
			} {
				write(t, c, req)
				method := strings.Fields(req)[0]
				resp, body := readResponse(t, br, method)
				want := method + " " + strings.Fields(req)[1] + " "
				if resp.StatusCode != 200 || !strings.HasPrefix(body, want) {
					t.Fatalf("request %d: %d %q, want 200 %q...", i, resp.StatusCode, body, want)
				}
			}
			if n := rb.ln.accepts.Load(); n != tt.conns {
				t.Errorf("the backend saw %d connections, want %d", n, tt.conns)
			}
		})
	}
}

// TestConfigComesWhole: the front door has no defaults of its own; relay's
// configuration is the one home of them, and a setting left out is an
// error naming it rather than a silent default.
func TestConfigComesWhole(t *testing.T) {
	bs := []*backend.Backend{newBackendFor(t, "127.0.0.1:1", 1)}
	if _, err := build(ConfigFrom(config.Default()), bs); err != nil {
		t.Fatalf("the configuration's defaults: %v", err)
	}
	_, err := build(Config{Pool: core.PoolConfig{Algorithm: "round-robin"}}, bs)
	if err == nil {
		t.Fatal("an empty Config was accepted")
	}
	for _, want := range []string{"header timeout", "idle timeout", "max header bytes", "connect timeout", "response timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	cfg := ConfigFrom(config.Default())
	cfg.Pool.Retries = 8
	if _, err := build(cfg, bs); err == nil || !strings.Contains(err.Error(), "retries 8 is outside 0..7") {
		t.Errorf("retries 8: %v, want an error naming the bound", err)
	}
}

// TestNoIdleConnectionsKeptWhenTheFileSaysNone: max_idle_conns_per_backend
// 0 keeps none, as the file documents, with no translation on the way.
func TestNoIdleConnectionsKeptWhenTheFileSaysNone(t *testing.T) {
	hb := newHTTPBackend(t, "a", 1, nil)
	fc := config.Default()
	fc.MaxIdleConnsPerBackend = 0
	r := startRelayExactly(t, ConfigFrom(fc), hb.b)
	cl := newClient(t, 1, "")
	for range 3 {
		if res := get(t, cl, r.url+"/"); res.status != 200 {
			t.Fatalf("status %d", res.status)
		}
	}
	if n := hb.ln.accepts.Load(); n != 3 {
		t.Errorf("3 requests used %d backend connections, want 3 (none kept)", n)
	}
}
