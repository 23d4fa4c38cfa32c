package health

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2/hpack"

	"relay/internal/backend"
	"relay/internal/h2up"
	"relay/internal/tlsconf"
)

// The gRPC probe asks grpc.health.v1.Health/Check, as Envoy's gRPC checker
// and Kubernetes' grpc probes do, over relay's own HTTP/2 client
// (internal/h2up): h2c to an http:// backend, h2 by ALPN to an https://
// one with the backend's TLS settings. The backend passes when it answers
// HTTP 200, grpc-status 0 and a HealthCheckResponse whose status is
// SERVING; anything else fails with what it was.
//
// With Config.ReuseConnection the HTTP/2 connection is kept between
// checks and each check is a new stream on it; any error drops it, and a
// kept connection that turns out closed or refuses the stream (the
// backend's idle timeout, a GOAWAY) is replaced at once by a new one, as
// the HTTP probe does with a kept connection the backend closed. Without
// it every check opens a connection and closes it after the answer. On a
// new connection the request goes once the backend's SETTINGS are in
// (settle).

// grpcHealthPath is the :path of the Check method.
const grpcHealthPath = "/grpc.health.v1.Health/Check"

// grpcCheck is the gRPC probe of one backend. The request head and body
// are built once, when the checker is made.
type grpcCheck struct {
	addr    string              // the host:port dialled
	target  string              // what errors name: the method, the service and the backend
	fields  []hpack.HeaderField // the request head, without grpc-timeout
	body    []byte              // the request body: one gRPC message
	tls     func() *tls.Config  // nil for h2c; read at each new connection, so a reload's settings apply
	h2tls   atomic.Pointer[alpnTLS]
	timeout time.Duration // the check's timeout, which bounds each write
	keep    bool

	idle   atomic.Pointer[grpcConn] // the kept connection, nil when none
	closed atomic.Bool              // closeIdle was called: keep nothing more
}

// alpnTLS is a backend's TLS settings with h2 offered by ALPN, made once
// for each settings value the backend has.
type alpnTLS struct{ of, h2 *tls.Config }

// grpcConn is a probe's HTTP/2 connection.
type grpcConn struct {
	c         *h2up.Conn
	sniff     *sniffConn // the h2c connection's first bytes; nil over TLS
	idleSince time.Time
}

// errStaleH2 reports that a kept connection was closed or refused the
// stream before the backend took the request: the probe asks again on a
// new one.
var errStaleH2 = errors.New("kept HTTP/2 connection closed by the backend")

// newGRPCCheck builds the probe of b: Health/Check for service, with the
// backend's host:port as :authority.
func newGRPCCheck(b *backend.Backend, service string, timeout time.Duration, keep bool) *grpcCheck {
	scheme := "http"
	var tc func() *tls.Config
	if b.URL != nil && b.URL.Scheme == "https" {
		scheme, tc = "https", b.TLS
	}
	svc := "the server's overall health"
	if service != "" {
		svc = strconv.Quote(service)
	}
	return &grpcCheck{
		addr:   b.Addr,
		target: fmt.Sprintf("grpc.health.v1.Health/Check of %s on %s://%s", svc, scheme, b.Addr),
		fields: []hpack.HeaderField{
			{Name: ":method", Value: "POST"},
			{Name: ":scheme", Value: scheme},
			{Name: ":authority", Value: b.Addr},
			{Name: ":path", Value: grpcHealthPath},
			{Name: "content-type", Value: "application/grpc"},
			{Name: "te", Value: "trailers"},
			{Name: "user-agent", Value: "relay-health-check"},
		},
		body:    grpcRequestBody(service),
		tls:     tc,
		timeout: timeout,
		keep:    keep,
	}
}

// probe asks the backend once: on the kept connection if there is one
// fit to ask on, and on a new one if there is none or it turns out
// closed.
func (g *grpcCheck) probe(ctx context.Context) error {
	if c := g.idle.Swap(nil); c != nil {
		if time.Since(c.idleSince) > maxKeptIdle || !c.c.Usable() {
			c.c.Close()
		} else if err := g.ask(ctx, c, true); err != errStaleH2 {
			return err
		}
	}
	c, err := g.dial(ctx)
	if err != nil {
		return err
	}
	return g.ask(ctx, c, false)
}

// dial connects to the backend and starts HTTP/2: h2c on the bare
// connection, or h2 over TLS agreed by ALPN.
func (g *grpcCheck) dial(ctx context.Context) (*grpcConn, error) {
	raw, err := dialer.DialContext(ctx, "tcp", g.addr)
	if err != nil {
		return nil, fmt.Errorf("health check %s: %w", g.target, err)
	}
	gc := &grpcConn{}
	var nc net.Conn
	if g.tls == nil {
		gc.sniff = newSniffConn(raw)
		nc = gc.sniff
	} else {
		tc := tls.Client(raw, g.alpn(g.tls()))
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, g.fail(ctx, "TLS handshake", err)
		}
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			resetClose(raw)
			return nil, fmt.Errorf("health check %s: the backend did not agree to HTTP/2 by ALPN (it chose %q), which gRPC needs", g.target, p)
		}
		nc = tc
	}
	// The check's timeout bounds every write on the connection, so a
	// backend that stops reading fails the check rather than stall it.
	c, err := h2up.Start(nc, h2up.Options{Name: g.addr, MaxStreams: 1, StreamWindow: 64 << 10, WriteTimeout: g.timeout})
	if err != nil {
		return nil, g.fail(ctx, "starting HTTP/2", err)
	}
	gc.c = c
	return gc, nil
}

// alpn returns tc offering h2 by ALPN, made once per value of tc.
func (g *grpcCheck) alpn(tc *tls.Config) *tls.Config {
	if a := g.h2tls.Load(); a != nil && a.of == tc {
		return a.h2
	}
	h2 := tlsconf.H2(tc)
	g.h2tls.Store(&alpnTLS{of: tc, h2: h2})
	return h2
}

// ask runs one call on c under ctx and then keeps or closes c. On a new
// connection the call waits for the backend's first SETTINGS (settle).
func (g *grpcCheck) ask(ctx context.Context, c *grpcConn, reused bool) error {
	if !reused {
		if err := g.settle(ctx, c); err != nil {
			c.c.Close()
			return err
		}
	}
	s := c.c.Open()
	if s == nil {
		why := c.c.Err() // before Close, which would say relay closed it
		c.c.Close()
		if reused {
			return errStaleH2
		}
		if why == nil {
			why = errors.New("the backend allows no stream (SETTINGS_MAX_CONCURRENT_STREAMS 0)")
		}
		// The reading goroutine may have given the connection up for
		// what the backend sent before the stream was asked for: an
		// answer in HTTP/1.1 is reported as one here too.
		return g.explain(ctx, c, fmt.Errorf("the new HTTP/2 connection took no stream: %w", why))
	}
	d, _ := ctx.Deadline()
	s.SetReadDeadline(d)
	s.SetWriteDeadline(d)
	// Cancelling the context (Stop) moves the deadlines into the past,
	// which ends a blocked wait at once. The stream is not closed before
	// that has run: Close hands it back for reuse.
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		s.SetReadDeadline(aLongTimeAgo)
		s.SetWriteDeadline(aLongTimeAgo)
		close(fired)
	})
	taken, err := g.call(s, d)
	if !stop() {
		<-fired
	}
	s.Close()
	switch {
	case err != nil && reused && !taken && stale(err):
		c.c.Close()
		return errStaleH2
	case err != nil:
		c.c.Close()
		return g.explain(ctx, c, err)
	case g.keep:
		g.keepIdle(c)
	default:
		c.c.Close()
	}
	return nil
}

// settle waits for the backend's first SETTINGS on a new connection
// before the check's request goes out, as the data plane does with its
// own connections, so that a backend that does not speak HTTP/2 fails for
// what it sent. Written at once, the request could meet a backend that
// had answered in HTTP/1.1 and reset the connection, before relay's
// reading goroutine had read the answer: the write fails, h2up closes the
// socket, and the answer is lost unread, so the check would report a
// broken pipe. Waiting, the check fails as soon as the backend's first
// bytes are an HTTP/1.1 status line, without waiting for the connection
// to end.
func (g *grpcCheck) settle(ctx context.Context, c *grpcConn) error {
	const step = "waiting for the backend's HTTP/2 SETTINGS"
	var http1 <-chan struct{} // nil over TLS: ALPN agreed to h2
	if c.sniff != nil {
		http1 = c.sniff.http1
	}
	select {
	case <-c.c.Settled():
		return nil
	case <-http1:
		return g.explain(ctx, c, nil)
	case <-c.c.Done():
		return g.explain(ctx, c, stepError{step, c.c.Err()})
	case <-ctx.Done():
		return g.explain(ctx, c, stepError{step, ctx.Err()})
	}
}

// call sends the request on s and judges the answer. taken says the
// backend answered at all, so that a failure on a kept connection is not
// taken for a stale one.
func (g *grpcCheck) call(s *h2up.Stream, deadline time.Time) (taken bool, err error) {
	fields := g.fields
	if !deadline.IsZero() {
		fields = append(fields[:len(fields):len(fields)], hpack.HeaderField{Name: "grpc-timeout", Value: grpcTimeout(time.Until(deadline))})
	}
	if err := s.WriteHead(fields, false); err != nil {
		return false, stepError{"sending request", err}
	}
	// A server may answer in full once it has the message, before the
	// request's end, and then reset the stream with NO_ERROR (grpc-go
	// does): the answer stands (RFC 9113 8.1), so a failure to end the
	// request counts only when no answer comes.
	_, sendErr := s.Write(g.body)
	if sendErr == nil {
		sendErr = s.CloseWrite(nil)
	}
	head, err := s.ReadHead()
	for err == nil && head.Status < 200 {
		head, err = s.ReadHead() // informational heads
	}
	switch {
	case err != nil && sendErr != nil:
		return false, stepError{"sending request", sendErr}
	case err != nil:
		return false, stepError{"reading response head", err}
	}
	if head.Status != 200 {
		return true, fmt.Errorf("HTTP status %d, not 200", head.Status)
	}
	if ct := field(head.Fields, "content-type"); !isGRPCContentType(ct) {
		return true, fmt.Errorf("content-type %q is not application/grpc", ct)
	}
	if head.End {
		// Trailers-only: the head carries the status, and there is no
		// message.
		if err := grpcStatus(head.Fields); err != nil {
			return true, err
		}
		return true, errors.New("no response message")
	}
	body, err := readBounded(s, 5+maxGRPCMessage)
	if err != nil {
		return true, stepError{"reading response", err}
	}
	if err := grpcStatus(s.Trailers()); err != nil {
		return true, err
	}
	msg, err := grpcMessage(body)
	if err != nil {
		return true, err
	}
	st, err := servingStatus(msg)
	if err != nil {
		return true, err
	}
	if st != serving {
		return true, fmt.Errorf("status %s", servingName(st))
	}
	return true, nil
}

// readBounded reads s to its end, failing once more than limit bytes came.
func readBounded(s *h2up.Stream, limit int) ([]byte, error) {
	var buf [5 + maxGRPCMessage + 1]byte
	n := 0
	for {
		m, err := s.Read(buf[n:min(limit+1, len(buf))])
		n += m
		switch {
		case n > limit:
			return nil, fmt.Errorf("response body over %d bytes, more than a HealthCheckResponse", limit)
		case err == io.EOF:
			return append([]byte(nil), buf[:n]...), nil
		case err != nil:
			return nil, err
		}
	}
}

// grpcStatus reads the grpc-status and grpc-message of a trailer block
// (or a trailers-only head) and returns nil for status 0.
func grpcStatus(fs []hpack.HeaderField) error {
	v := field(fs, "grpc-status")
	if v == "" {
		return errors.New("no grpc-status in the response's trailers")
	}
	code, err := strconv.Atoi(v)
	if err != nil || code < 0 {
		return fmt.Errorf("grpc-status %q is not a status code", v)
	}
	if code == 0 {
		return nil
	}
	msg := percentDecode(field(fs, "grpc-message"))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		return fmt.Errorf("grpc-status %d %s", code, grpcCodeName(code))
	}
	return fmt.Errorf("grpc-status %d %s: %s", code, grpcCodeName(code), msg)
}

// field returns the value of the first field named name, "" if none.
func field(fs []hpack.HeaderField, name string) string {
	for _, f := range fs {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// isGRPCContentType reports whether ct is application/grpc or one of its
// subtypes (application/grpc+proto).
func isGRPCContentType(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// grpcTimeout writes d as a grpc-timeout value: at most 8 digits and a
// unit, in milliseconds, or seconds when that is too long; never 0.
func grpcTimeout(d time.Duration) string {
	ms := max(d.Milliseconds(), 1)
	if ms < 1e8 {
		return strconv.FormatInt(ms, 10) + "m"
	}
	return strconv.FormatInt(min(int64(d/time.Second), 1e8-1), 10) + "S"
}

// stepError names the step of the exchange an error of h2up's happened in.
type stepError struct {
	step string
	err  error
}

func (e stepError) Error() string { return e.step + ": " + e.err.Error() }
func (e stepError) Unwrap() error { return e.err }

// stale reports whether err on a kept connection means the backend had
// closed it or refused the stream before taking the request.
func stale(err error) bool {
	return errors.Is(err, h2up.ErrRefused) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// explain turns an error of one call into the probe's failure: a
// deadline is the check's timeout (or the checker stopping), and an h2c
// backend that answered in HTTP/1.1 is said to be one, whatever err is.
func (g *grpcCheck) explain(ctx context.Context, c *grpcConn, err error) error {
	if c.sniff != nil && c.sniff.answeredHTTP1() {
		return fmt.Errorf("health check %s: the backend answered in HTTP/1.1: it does not speak HTTP/2 without TLS (h2c), which gRPC needs", g.target)
	}
	var se stepError
	if errors.As(err, &se) {
		return g.fail(ctx, se.step, se.err)
	}
	return fmt.Errorf("health check %s: %w", g.target, err)
}

// fail names the probe and the step that failed; a deadline error is
// reported as the context's, as the HTTP probe does.
func (g *grpcCheck) fail(ctx context.Context, step string, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		err = context.Cause(ctx)
		if err == nil {
			err = context.DeadlineExceeded
		}
	}
	return fmt.Errorf("health check %s: %s: %w", g.target, step, err)
}

// keepIdle stores c for the next probe, or closes it if another
// connection is stored already or the checker has stopped.
func (g *grpcCheck) keepIdle(c *grpcConn) {
	c.idleSince = time.Now()
	if !g.idle.CompareAndSwap(nil, c) {
		c.c.Close()
		return
	}
	if g.closed.Load() {
		g.closeIdle()
	}
}

// holds reports whether a connection is kept for the next probe.
func (g *grpcCheck) holds() bool { return g.idle.Load() != nil }

// closeIdle closes the kept connection, if any, and keeps none from now on.
func (g *grpcCheck) closeIdle() {
	g.closed.Store(true)
	if c := g.idle.Swap(nil); c != nil {
		c.c.Close()
	}
}

// sniffConn notes whether the first bytes an h2c backend sends are an
// HTTP/1.1 status line, the answer of a backend that does not speak
// HTTP/2, so the check can say so rather than report a frame it could
// not parse. Only the connection's reading goroutine reads it.
type sniffConn struct {
	net.Conn
	first [5]byte
	n     int
	// http1 is closed once the first bytes are "HTTP/", before the
	// reading goroutine acts on them.
	http1 chan struct{}
}

func newSniffConn(c net.Conn) *sniffConn { return &sniffConn{Conn: c, http1: make(chan struct{})} }

func (s *sniffConn) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if s.n < len(s.first) {
		s.n += copy(s.first[s.n:], p[:n])
		if s.n == len(s.first) && string(s.first[:]) == "HTTP/" {
			close(s.http1)
		}
	}
	return n, err
}

// answeredHTTP1 reports whether the backend's first bytes were an HTTP/1.1
// status line.
func (s *sniffConn) answeredHTTP1() bool {
	select {
	case <-s.http1:
		return true
	default:
		return false
	}
}
