package health

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"relay/internal/backend"
)

// The HTTP probe speaks just enough HTTP/1.1 to ask one question, straight on
// a net.Conn: write a request built once per backend, read the status line,
// drain the rest. At a thousand backends the cost per probe is what matters,
// and net/http spends most of it on machinery a probe does not need (three
// goroutines per request, header maps, bufio buffers, about a hundred
// allocations): measured by BenchmarkHTTPProbe, about 160 µs of CPU per
// probe against about 50 µs here. The wire package is not used either:
// health checking stays independent of the data path.
//
// Every probe opens a new connection and asks the backend to close it. That
// proves the backend still accepts connections, which is what traffic needs:
// a server out of file descriptors or connection-tracking entries goes on
// answering on old connections while it refuses new ones. It is HAProxy's
// default, and it lets the end of the response be the end of the connection,
// so no response framing has to be parsed. Keeping one connection per backend
// alive between probes costs less, about 30 µs of CPU per probe against about
// 80 µs in scale_test.go (1,000 backends every 5 s: 0.6% of one core against
// 1.6%), but both fit in relay's 2% budget, so the probe asks the better
// question. Most of a new connection's cost is the kernel's: on loopback, the
// handshake and the teardown run both ends' TCP code in relay's system calls.

// maxDrain bounds how much of a health response is read after the status
// line. The response is drained so that a backend that sends a 2xx head and
// then stalls fails the check, but a chatty status page should not cost more
// than this: a 2xx still going after maxDrain bytes passes.
const maxDrain = 64 << 10

// maxInterim bounds the interim (1xx) responses skipped before the final one.
const maxInterim = 5

// readBufSize is the buffer a response is read through. The status line must
// fit in it; header lines need not.
const readBufSize = 512

// aLongTimeAgo is a deadline in the past: setting it makes blocked reads and
// writes on a connection return at once.
var aLongTimeAgo = time.Unix(1, 0)

// httpCheck is the HTTP probe of one backend. The request bytes and the
// target named in errors are built once, when the checker is made, so a
// probe allocates only what dialling and the runtime need.
type httpCheck struct {
	addr   string      // the host:port dialled
	target string      // scheme://addr/path, for errors
	req    []byte      // the whole request
	tls    *tls.Config // nil for plain HTTP
	bufs   *sync.Pool  // of *[readBufSize]byte, shared by the checker's probes
}

// newHTTPCheck builds the probe of b: GET path sent to b's address with the
// Host of its URL, as a client of the backend would send it.
func newHTTPCheck(b *backend.Backend, path string, bufs *sync.Pool) *httpCheck {
	scheme, host := "http", b.Addr
	var tc *tls.Config
	if b.URL != nil {
		host = b.URL.Host
		if b.URL.Scheme == "https" {
			scheme = "https"
			tc = &tls.Config{ServerName: b.URL.Hostname()}
		}
	}
	req := make([]byte, 0, 96+len(path)+len(host))
	req = append(req, "GET "...)
	req = append(req, path...)
	req = append(req, " HTTP/1.1\r\nHost: "...)
	req = append(req, host...)
	req = append(req, "\r\nUser-Agent: relay-health-check\r\nConnection: close\r\n\r\n"...)
	return &httpCheck{addr: b.Addr, target: scheme + "://" + b.Addr + path, req: req, tls: tc, bufs: bufs}
}

// newReadBufs returns the pool of response buffers that a checker's HTTP
// probes share: only the probes in flight hold one.
func newReadBufs() *sync.Pool {
	return &sync.Pool{New: func() any { return new([readBufSize]byte) }}
}

// probe sends the request on a new connection and passes on a 2xx answer.
func (h *httpCheck) probe(ctx context.Context) error {
	raw, err := dialer.DialContext(ctx, "tcp", h.addr)
	if err != nil {
		return fmt.Errorf("health check GET %s: %w", h.target, err)
	}
	defer raw.Close()
	// One deadline, the context's, bounds the write, the head and the drain.
	// Cancelling the context (Stop) moves it into the past, which ends a
	// blocked read at once.
	if d, ok := ctx.Deadline(); ok {
		raw.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(aLongTimeAgo) })
	defer stop()
	conn := raw
	if h.tls != nil {
		tc := tls.Client(raw, h.tls)
		if err := tc.Handshake(); err != nil {
			return h.fail(ctx, "TLS handshake", err)
		}
		conn = tc
	}

	if _, err := conn.Write(h.req); err != nil {
		return h.fail(ctx, "writing request", err)
	}
	buf := h.bufs.Get().(*[readBufSize]byte)
	defer h.bufs.Put(buf)
	r := responseReader{conn: conn, buf: buf[:]}
	code, status, err := r.finalStatus()
	if err != nil {
		return h.fail(ctx, "reading status line", err)
	}
	if code < 200 || code > 299 {
		return fmt.Errorf("health check GET %s: status %s", h.target, status)
	}
	if err := r.drain(maxDrain); err != nil {
		return h.fail(ctx, "reading body", err)
	}
	// The answer is complete and the backend has closed its side (or is cut
	// off at maxDrain, which the kernel answers with a reset anyway). Closing
	// with a reset rather than a FIN spares the backend a TIME_WAIT socket
	// per check, and both kernels the rest of the FIN exchange; HAProxy ends
	// its checks the same way.
	if tc, ok := raw.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	return nil
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

// responseReader reads an HTTP/1.x response through a small buffer.
type responseReader struct {
	conn net.Conn
	buf  []byte
	r, w int // buf[r:w] is read from conn and not yet consumed
}

// errLineTooLong reports a status line longer than the read buffer; a health
// endpoint has no reason to send one.
var errLineTooLong = errors.New("line too long")

// finalStatus returns the status code of the final response and its status
// text ("200 OK", valid until the next read), skipping interim 1xx responses
// as an HTTP client does. 101 Switching Protocols is final: a probe never
// asks to upgrade.
func (r *responseReader) finalStatus() (code int, status []byte, err error) {
	for range maxInterim + 1 {
		line, err := r.line()
		if err != nil {
			return 0, nil, err
		}
		code, ok := parseStatusLine(line)
		if !ok {
			return 0, nil, fmt.Errorf("malformed status line %q", line)
		}
		if code >= 200 || code == 101 {
			return code, line[len("HTTP/1.1 "):], nil
		}
		if err := r.skipHead(); err != nil {
			return 0, nil, err
		}
	}
	return 0, nil, fmt.Errorf("more than %d interim responses", maxInterim)
}

// parseStatusLine reads the code of "HTTP/1.x NNN reason" and reports
// whether the line has that shape. The reason phrase may be empty, with or
// without the space before it.
func parseStatusLine(line []byte) (code int, ok bool) {
	const prefix = "HTTP/1."
	if len(line) < len("HTTP/1.1 200") || string(line[:len(prefix)]) != prefix {
		return 0, false
	}
	if v := line[len(prefix)]; v < '0' || v > '9' || line[len(prefix)+1] != ' ' {
		return 0, false
	}
	for _, c := range line[len(prefix)+2 : len(prefix)+5] {
		if c < '0' || c > '9' {
			return 0, false
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 || len(line) > len(prefix)+5 && line[len(prefix)+5] != ' ' {
		return 0, false
	}
	return code, true
}

// line returns the next line without its line ending (CRLF, or a bare LF
// as lenient clients accept). The line is valid until the next read.
func (r *responseReader) line() ([]byte, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.r:r.w], '\n'); i >= 0 {
			line := r.buf[r.r : r.r+i]
			r.r += i + 1
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		}
		if r.r > 0 {
			r.w = copy(r.buf, r.buf[r.r:r.w])
			r.r = 0
		}
		if r.w == len(r.buf) {
			return nil, errLineTooLong
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// skipHead discards header lines through the empty line that ends a head.
// The lines may be longer than the buffer: only their ends are looked for.
func (r *responseReader) skipHead() error {
	lineLen := 0 // bytes of the current line so far, not counting CR
	for {
		for ; r.r < r.w; r.r++ {
			switch r.buf[r.r] {
			case '\n':
				if lineLen == 0 {
					r.r++
					return nil
				}
				lineLen = 0
			case '\r':
			default:
				lineLen++
			}
		}
		r.r, r.w = 0, 0
		if err := r.fill(); err != nil {
			return err
		}
	}
}

// fill reads more of the response after buf[:w]. The end of the response
// is an error here: the head is not complete.
func (r *responseReader) fill() error {
	n, err := r.conn.Read(r.buf[r.w:])
	r.w += n
	if n == 0 && err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// drain reads the rest of the response until the backend closes the
// connection, or until limit bytes have been read.
func (r *responseReader) drain(limit int) error {
	read := r.w - r.r
	for read < limit {
		n, err := r.conn.Read(r.buf)
		read += n
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}
