package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/testaddr"
)

// ioTimeout bounds every blocking read or write a test makes on a raw
// connection, so a relay bug shows up as a failure instead of a hung test.
const ioTimeout = 10 * time.Second

// countingListener counts the connections a listener accepted.
type countingListener struct {
	net.Listener
	accepts atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepts.Add(1)
	}
	return c, err
}

func listen(t *testing.T) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &countingListener{Listener: ln}
}

// newBackendFor returns a backend.Backend for a listening address.
func newBackendFor(t *testing.T, addr string, weight int) *backend.Backend {
	t.Helper()
	b, err := backend.New(&url.URL{Scheme: "http", Host: addr}, weight)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deadAddr returns an address on 127.0.0.1 where a dial is refused at
// once, for the whole test.
func deadAddr(t *testing.T) string { return testaddr.Refused(t) }

// httpBackend is a net/http server standing in for a backend. It counts the
// requests and connections it receives and labels every response with its
// name in X-Backend.
type httpBackend struct {
	name string
	srv  *httptest.Server
	ln   *countingListener
	b    *backend.Backend
	hits atomic.Int64
}

// newHTTPBackend starts a backend whose handler is h, or one that answers
// its own name when h is nil.
func newHTTPBackend(t *testing.T, name string, weight int, h http.HandlerFunc) *httpBackend {
	t.Helper()
	hb := &httpBackend{name: name, ln: listen(t)}
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name) }
	}
	hb.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hb.hits.Add(1)
		w.Header().Set("X-Backend", name)
		h(w, r)
	}))
	hb.srv.Listener.Close()
	hb.srv.Listener = hb.ln
	hb.srv.Start()
	t.Cleanup(hb.srv.Close)
	hb.b = newBackendFor(t, hb.ln.Addr().String(), weight)
	return hb
}

func backendsOf(hbs ...*httpBackend) []*backend.Backend {
	bs := make([]*backend.Backend, len(hbs))
	for i, hb := range hbs {
		bs[i] = hb.b
	}
	return bs
}

// rawBackend is a backend written directly on a net.Listener, for answers
// net/http would not give: exact header bytes, dropped connections, 101.
// serve handles one connection; the connection is closed when it returns.
type rawBackend struct {
	ln    *countingListener
	b     *backend.Backend
	hits  atomic.Int64 // requests read with next
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newRawBackend(t *testing.T, serve func(rb *rawBackend, c net.Conn, br *bufio.Reader)) *rawBackend {
	t.Helper()
	rb := &rawBackend{ln: listen(t), conns: make(map[net.Conn]struct{})}
	rb.b = newBackendFor(t, rb.ln.Addr().String(), 1)
	rb.wg.Add(1)
	go func() {
		defer rb.wg.Done()
		for {
			c, err := rb.ln.Accept()
			if err != nil {
				return
			}
			rb.mu.Lock()
			rb.conns[c] = struct{}{}
			rb.mu.Unlock()
			rb.wg.Add(1)
			go func() {
				defer rb.wg.Done()
				defer func() {
					rb.mu.Lock()
					delete(rb.conns, c)
					rb.mu.Unlock()
					c.Close()
				}()
				c.SetDeadline(time.Now().Add(ioTimeout))
				serve(rb, c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		rb.ln.Close()
		rb.mu.Lock()
		for c := range rb.conns {
			c.Close()
		}
		rb.mu.Unlock()
		rb.wg.Wait()
	})
	return rb
}

// next reads the next request on a raw backend connection and counts it.
func (rb *rawBackend) next(br *bufio.Reader) (*rawRequest, error) {
	r, err := readRawRequest(br)
	if err == nil {
		rb.hits.Add(1)
	}
	return r, err
}

// rawRequest is a request exactly as it arrived: its header map is read
// with textproto, which drops nothing, unlike http.ReadRequest.
type rawRequest struct {
	Method, Target, Proto string
	Header                textproto.MIMEHeader
	Body                  []byte
	Trailer               textproto.MIMEHeader
}

// readHead reads a start line and header section.
func readHead(br *bufio.Reader) (string, textproto.MIMEHeader, error) {
	tp := textproto.NewReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		return "", nil, err
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return "", nil, fmt.Errorf("reading header after %q: %w", line, err)
	}
	return line, h, nil
}

func readRawRequest(br *bufio.Reader) (*rawRequest, error) {
	line, h, err := readHead(br)
	if err != nil {
		return nil, err
	}
	parts := strings.SplitN(line, " ", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("malformed request line %q", line)
	}
	r := &rawRequest{Method: parts[0], Target: parts[1], Proto: parts[2], Header: h}
	switch {
	case strings.EqualFold(h.Get("Transfer-Encoding"), "chunked"):
		if r.Body, err = io.ReadAll(httputil.NewChunkedReader(br)); err != nil {
			return nil, fmt.Errorf("reading chunked body: %w", err)
		}
		if r.Trailer, err = textproto.NewReader(br).ReadMIMEHeader(); err != nil {
			return nil, fmt.Errorf("reading trailers: %w", err)
		}
	case h.Get("Content-Length") != "":
		n, err := strconv.Atoi(h.Get("Content-Length"))
		if err != nil {
			return nil, err
		}
		r.Body = make([]byte, n)
		if _, err := io.ReadFull(br, r.Body); err != nil {
			return nil, fmt.Errorf("reading body: %w", err)
		}
	}
	return r, nil
}

// okResponse is a minimal keep-alive response with body.
func okResponse(body string) string {
	return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// testRelay is a running proxy and the address clients reach it on.
type testRelay struct {
	p      *Proxy
	addr   string
	url    string
	ln     *countingListener
	served chan error // receives Serve's result

	once     sync.Once
	serveErr error
}

// serveResult waits for Serve to return and reports what it returned.
func (r *testRelay) serveResult(t *testing.T) error {
	t.Helper()
	r.once.Do(func() {
		select {
		case r.serveErr = <-r.served:
		case <-time.After(ioTimeout):
			r.serveErr = errors.New("Serve did not return")
		}
	})
	return r.serveErr
}

// startRelay starts a proxy over bs on 127.0.0.1 and shuts it down when the
// test ends.
func startRelay(t *testing.T, cfg Config, bs ...*backend.Backend) *testRelay {
	t.Helper()
	return startRelayExactly(t, withDefaults(cfg), bs...)
}

// withDefaults fills cfg's unset fields with relay's defaults, so a test
// names only the settings it is about. A test that needs a setting at
// zero builds its Config with withDefaults and then sets it.
func withDefaults(cfg Config) Config {
	d := ConfigFrom(config.Default())
	set := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setD := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	if cfg.Pool.Algorithm == "" {
		cfg.Pool.Algorithm = d.Pool.Algorithm
	}
	set(&cfg.Pool.Retries, d.Pool.Retries)
	set(&cfg.Pool.MaxIdlePerBackend, d.Pool.MaxIdlePerBackend)
	set(&cfg.MaxHeaderBytes, d.MaxHeaderBytes)
	set(&cfg.MaxConnections, d.MaxConnections)
	setD(&cfg.Pool.ConnectTimeout, d.Pool.ConnectTimeout)
	setD(&cfg.Pool.ResponseTimeout, d.Pool.ResponseTimeout)
	setD(&cfg.Pool.IdleTimeout, d.Pool.IdleTimeout)
	set(&cfg.Pool.BreakerFailures, d.Pool.BreakerFailures)
	setD(&cfg.Pool.BreakerOpenTime, d.Pool.BreakerOpenTime)
	set(&cfg.Pool.MaxEjectedPercent, d.Pool.MaxEjectedPercent)
	set(&cfg.Pool.MaxQueued, d.Pool.MaxQueued)
	setD(&cfg.Pool.QueueTimeout, d.Pool.QueueTimeout)
	set(&cfg.Pool.RetryBudgetPercent, d.Pool.RetryBudgetPercent)
	set(&cfg.Pool.RetryBudgetFloor, d.Pool.RetryBudgetFloor)
	setD(&cfg.HeaderTimeout, d.HeaderTimeout)
	setD(&cfg.IdleTimeout, d.IdleTimeout)
	setD(&cfg.BodyTimeout, d.BodyTimeout)
	set(&cfg.BodyMinRate, d.BodyMinRate)
	if cfg.BodyBufferBytes == 0 {
		cfg.BodyBufferBytes = d.BodyBufferBytes
	}
	return cfg
}

// startRelayExactly is startRelay with cfg taken as it is.
func startRelayExactly(t *testing.T, cfg Config, bs ...*backend.Backend) *testRelay {
	t.Helper()
	p, err := build(cfg, bs)
	if err != nil {
		t.Fatal(err)
	}
	r := &testRelay{p: p, ln: listen(t), served: make(chan error, 1)}
	r.addr = r.ln.Addr().String()
	r.url = "http://" + r.addr
	go func() { r.served <- p.Serve(r.ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := r.serveResult(t); !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return r
}

// newClient returns a keep-alive client for up to conns concurrent
// connections. With local set, it connects from that loopback address, so
// relay sees a different client IP.
func newClient(t *testing.T, conns int, local string) *http.Client {
	t.Helper()
	d := &net.Dialer{Timeout: ioTimeout}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	tr := &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: conns,
		DisableCompression:  true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: ioTimeout}
}

// result is what a client saw of one response.
type result struct {
	status  int
	backend string // X-Backend
	body    string
	header  http.Header
}

func do(t *testing.T, c *http.Client, req *http.Request) result {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return result{status: resp.StatusCode, backend: resp.Header.Get("X-Backend"), body: string(body), header: resp.Header}
}

func get(t *testing.T, c *http.Client, url string) result {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, c, req)
}

// getConcurrently runs clients goroutines that each GET url each times
// over c, and counts the answers by status.
func getConcurrently(t *testing.T, c *http.Client, url string, clients, each int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	statuses := make(map[int]int)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range each {
				res := get(t, c, url)
				mu.Lock()
				statuses[res.status]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return statuses
}

func post(t *testing.T, c *http.Client, url, body string) result {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return do(t, c, req)
}

// dialRelay opens a raw client connection to relay.
func dialRelay(t *testing.T, r *testRelay) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", r.addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(ioTimeout))
	return c, bufio.NewReader(c)
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatalf("writing to relay: %v", err)
	}
}

// readResponse reads one response, body included, from a raw connection.
func readResponse(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading response to %s: %v", method, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body of response to %s: %v", method, err)
	}
	return resp, string(body)
}

// expectClosed checks that relay closes the connection: the next read
// reports the end of the stream rather than data or a timeout.
func expectClosed(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	n, err := br.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case n > 0:
		t.Errorf("connection still open: got more bytes")
	case errors.As(err, &ne) && ne.Timeout():
		t.Errorf("connection still open after %v", ioTimeout)
	}
}

// eventually polls cond until it holds or the timeout passes. It is for
// state relay updates just after the client already has its response, where
// there is nothing to wait on.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// expectNoneInFlight checks that relay counts no request in flight on any
// backend once clients have their answers: a count left behind would make
// least-conn and p2c shun that backend for good.
func expectNoneInFlight(t *testing.T, r *testRelay) {
	t.Helper()
	for _, b := range r.p.pool().Backends() {
		eventually(t, b.Name+" in-flight count back to 0", func() bool { return b.InFlight() == 0 })
	}
}
