package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"relay/internal/backend"
	"relay/internal/rawio"
)

// The HTTP probe asks one question straight on a net.Conn: it writes a
// request built once per backend and reads the answer with relay's own
// HTTP/1.1 engine (http_answer.go), the same strict reader the data path
// uses, through a buffer shared by the probes in flight. At a thousand
// backends the cost per probe is what matters, and net/http spends most of
// it on machinery a probe does not need (three goroutines per request,
// header maps, bufio buffers, about a hundred allocations): a net/http
// probe measured about 160 µs of CPU when this was chosen, where
// BenchmarkHTTPProbe measures this one at about 50 µs on a new connection
// and 15-19 µs on a kept one (2026-11-24).
//
// With Config.ReuseConnection (relay's default) the probe keeps its
// connection between checks, as Envoy's HTTP checker and the net/http-based
// ones of Traefik and Caddy do: most of a probe's cost is the kernel's
// handshake and teardown, which on loopback run both ends' TCP code in
// relay's own system calls. Measured by scale_test.go at 1,000 backends
// every 5 s, a new connection per check cost 2.1-2.4% of one core and a
// kept one about 0.85%. A kept connection the backend has closed meanwhile (its keep-alive
// timeout ran out) shows as an end of stream before any answer; the probe
// then asks again once on a new connection, so a backend's idle timeout never
// fails a check, and a backend that stops accepting connections fails at the
// latest when it drops the old one. Before a kept connection is used it must
// be quiet: anything the backend sent while it was idle (a 408 before
// closing, stray bytes) means it is not fit to ask on, and it is replaced. So
// is one idle longer than maxKeptIdle, which a firewall or NAT on the way may
// have forgotten without a word. Without ReuseConnection every check opens
// a new connection and sends Connection: close, as HAProxy does: that proves
// at every check that the backend accepts connections, which a server out of
// file descriptors stops doing while it goes on answering on old ones.

// maxKeptIdle is how long a probe connection may sit idle and still be used.
const maxKeptIdle = time.Minute

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads and
// writes on a connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

// httpCheck is the HTTP probe of one backend. The request bytes and the
// target named in errors are built once, when the checker is made, so a
// probe allocates only what dialling and the runtime need.
type httpCheck struct {
	addr   string             // the host:port dialled
	target string             // scheme://addr/path, for errors
	req    []byte             // the whole request
	tls    func() *tls.Config // nil for plain HTTP; read at each new connection, so a reload's settings apply
	bufs   *sync.Pool         // of *answerReader, shared by the checker's probes
	keep   bool               // keep the connection for the next probe

	idle   atomic.Pointer[probeConn] // the kept connection, nil when none
	closed atomic.Bool               // closeIdle was called: keep nothing more
}

// probeConn is a probe's connection: raw is the TCP connection, conn the
// one spoken over (raw itself, or TLS over it).
type probeConn struct {
	raw       net.Conn
	conn      net.Conn
	idleSince time.Time // when it was kept
}

// errStale reports that a kept connection ended before any of the answer
// arrived, or was answered 408: the backend closed or timed it out while it
// was idle, and the probe asks again on a new one.
var errStale = errors.New("kept connection closed by the backend")

// newHTTPCheck builds the probe of b: GET path sent to b's address with the
// Host of its URL, as a client of the backend would send it. keep says
// whether the connection is kept between probes.
func newHTTPCheck(b *backend.Backend, path string, keep bool, bufs *sync.Pool) *httpCheck {
	scheme, host := "http", b.Addr
	var tc func() *tls.Config
	if b.URL != nil {
		host = b.URL.Host
		if b.URL.Scheme == "https" {
			// The settings relay forwards with (backend.New gives an
			// https backend tlsconf.Client's defaults until SetTLS).
			scheme = "https"
			tc = b.TLS
		}
	}
	req := make([]byte, 0, 96+len(path)+len(host))
	req = append(req, "GET "...)
	req = append(req, path...)
	req = append(req, " HTTP/1.1\r\nHost: "...)
	req = append(req, host...)
	req = append(req, "\r\nUser-Agent: relay-health-check\r\n"...)
	if !keep {
		req = append(req, "Connection: close\r\n"...)
	}
	req = append(req, "\r\n"...)
	return &httpCheck{addr: b.Addr, target: scheme + "://" + b.Addr + path, req: req, tls: tc, bufs: bufs, keep: keep}
}

// probe asks the backend once and passes on a 2xx answer: on the kept
// connection if there is one, and on a new one if there is none or the kept
// one turns out to be closed.
func (h *httpCheck) probe(ctx context.Context) error {
	if c := h.idle.Swap(nil); c != nil {
		if time.Since(c.idleSince) > maxKeptIdle || !rawio.Quiet(c.raw) {
			resetClose(c.raw)
		} else if err := h.ask(ctx, c, true); err != errStale {
			return err
		}
	}
	raw, err := dialer.DialContext(ctx, "tcp", h.addr)
	if err != nil {
		return fmt.Errorf("health check GET %s: %w", h.target, err)
	}
	return h.ask(ctx, &probeConn{raw: raw, conn: raw}, false)
}

// ask runs one exchange on c under ctx and then keeps or closes c.
func (h *httpCheck) ask(ctx context.Context, c *probeConn, reused bool) error {
	// One deadline, the context's, bounds the handshake, the write, the head
	// and the body. Cancelling the context (Stop) moves it into the past,
	// which ends a blocked read at once.
	d, _ := ctx.Deadline()
	c.raw.SetDeadline(d)
	stop := context.AfterFunc(ctx, func() { c.raw.SetDeadline(aLongTimeAgo) })
	reusable, err := h.exchange(ctx, c, reused)
	stop()
	switch {
	case err != nil:
		c.raw.Close()
	case reusable:
		h.keepIdle(c)
	default:
		// The answer is complete, or cut off at maxDrain. Closing with a
		// reset rather than a FIN spares the backend a TIME_WAIT socket per
		// check, and both kernels the rest of the FIN exchange; HAProxy
		// ends its checks the same way.
		resetClose(c.raw)
	}
	return err
}

// exchange sends the request on c and reads the answer. It reports whether
// c may carry the next probe, and errStale when c was kept from an earlier
// probe and ended before any of the answer arrived.
func (h *httpCheck) exchange(ctx context.Context, c *probeConn, reused bool) (reusable bool, err error) {
	if h.tls != nil && !reused {
		tc := tls.Client(c.raw, h.tls())
		if err := tc.Handshake(); err != nil {
			return false, h.fail(ctx, "TLS handshake", err)
		}
		c.conn = tc
	}
	if _, err := c.conn.Write(h.req); err != nil {
		if reused && closedByPeer(err) {
			return false, errStale
		}
		return false, h.fail(ctx, "writing request", err)
	}
	return h.read(ctx, c.conn, reused)
}

// keepIdle stores c for the next probe, or closes it if another connection
// is stored already or the checker has stopped.
func (h *httpCheck) keepIdle(c *probeConn) {
	c.idleSince = time.Now()
	if !h.idle.CompareAndSwap(nil, c) {
		resetClose(c.raw)
		return
	}
	if h.closed.Load() { // closeIdle may have run before the store
		h.closeIdle()
	}
}

// holds reports whether a connection is kept for the next probe.
func (h *httpCheck) holds() bool { return h.idle.Load() != nil }

// closeIdle closes the kept connection, if any, and keeps none from now on.
func (h *httpCheck) closeIdle() {
	h.closed.Store(true)
	if c := h.idle.Swap(nil); c != nil {
		resetClose(c.raw)
	}
}

// resetClose closes a TCP connection with a reset, after an exchange that
// is complete: nothing is in flight for a FIN to protect.
func resetClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// closedByPeer reports whether err is the end of a connection the other
// side closed or reset.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// fail names the probe and the step that failed. A deadline error from the
// connection is reported as the context's, since the connection's deadline
// is the context's: the check timed out or was cancelled.
func (h *httpCheck) fail(ctx context.Context, step string, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = context.Cause(ctx)
		if err == nil { // the connection's timer fired before the context's
			err = context.DeadlineExceeded
		}
	}
	return fmt.Errorf("health check GET %s: %s: %w", h.target, step, err)
}
