package core

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/h1"
	"relay/internal/logging"
)

// A front door for tests of the core alone: requests are built in memory,
// answers are recorded, and the backends are real servers on 127.0.0.1.

// fakeDoor records what the core answers the client: the status, the
// header fields a real door would write (those not marked Hop), the body
// and its trailers, and the informational responses before it. Its own
// error answers carry Retry-After on a 503 and the request's id, as the
// real doors' do.
type fakeDoor struct {
	x          *Exchange
	status     int
	retryAfter string // what relay's own 503 would carry
	header     http.Header
	interim    []http.Header
	body       bytes.Buffer
	trailers   string
	backend    string // the X-Backend field of a backend's response
}

func (d *fakeDoor) Continue() error { return nil }
func (d *fakeDoor) Gone() bool      { return false }

func (d *fakeDoor) Interim(resp *h1.Response) error {
	d.interim = append(d.interim, headerOf(resp.Fields))
	return nil
}

// headerOf returns the fields a door passes on: those not marked Hop.
func headerOf(fields []h1.Field) http.Header {
	h := http.Header{}
	for _, f := range fields {
		if !f.Hop {
			h.Add(string(f.Name), string(f.Value))
		}
	}
	return h
}

func (d *fakeDoor) Respond(resp *h1.Response, body *ResponseBody) (int64, error, error) {
	d.status = resp.Status
	d.header = headerOf(resp.Fields)
	d.backend = d.header.Get("X-Backend")
	n, _ := d.body.Write(body.Prefix())
	buf := make([]byte, 4096)
	for !body.Done() {
		k, err := body.Read(buf)
		d.body.Write(buf[:k])
		n += k
		if err == io.EOF {
			d.trailers = string(body.Trailers())
			break
		}
		if err != nil {
			return int64(n), err, nil
		}
	}
	return int64(n), nil, nil
}

func (d *fakeDoor) Tunnel(resp *h1.Response, up net.Conn, _ []byte) int64 {
	d.status = resp.Status
	up.Close()
	return 0
}

func (d *fakeDoor) Error(status int, msg string) (int64, error) {
	d.status = status
	d.header = http.Header{}
	if status == 503 {
		d.retryAfter = RetryAfter
	}
	if id := d.x.RequestID(); id != nil {
		d.header.Set("X-Request-Id", string(id))
	}
	b := AppendErrorBody(nil, status, msg)
	d.body.Write(b)
	return int64(len(b)), nil
}

// memBody is a request body held in memory, with the trailer lines of a
// chunked one.
type memBody struct {
	b        []byte
	done     bool
	trailers []byte
}

func (m *memBody) Prefix() []byte   { return nil }
func (m *memBody) Done() bool       { return m.done }
func (m *memBody) Trailers() []byte { return m.trailers }

func (m *memBody) Read(p []byte) (int, error) {
	if len(m.b) == 0 {
		m.done = true
		return 0, io.EOF
	}
	n := copy(p, m.b)
	m.b = m.b[n:]
	m.done = len(m.b) == 0
	return n, nil
}

// reply is what a client got for one request.
type reply struct {
	status     int
	body       string
	retryAfter string
	backend    string      // the backend that answered (X-Backend)
	header     http.Header // the answer's fields
	interim    []http.Header
	trailers   string // the trailer lines of a chunked answer
	outcome    Outcome
	took       time.Duration
}

// req is a request as a front door hands it to the core.
type req struct {
	method string // GET when empty
	target string // / when empty
	// proto is the protocol the client spoke: HTTP/1.1 when empty,
	// HTTP/1.0 or HTTP/2.0.
	proto string
	// fields are header lines, each ending in CRLF, after Host: test.
	fields string
	body   string
	// trailers, when set, are the trailer lines of a chunked body.
	trailers string
	client   string // the client's address; 127.0.0.1:40000 when empty
	tls      bool
	// host is the Host field, test when empty; clientTLS what the
	// connection's TLS handshake established (Peer.Client).
	host      string
	clientTLS *ClientTLS
}

// send forwards one request with an optional body through c.
func send(c *Core, method, body string) reply { return do(c, req{method: method, body: body}) }

// do forwards r through c as a front door would.
func do(c *Core, r req) reply {
	method, target, line := r.method, r.target, "HTTP/1.1"
	if method == "" {
		method = "GET"
	}
	if target == "" {
		target = "/"
	}
	if r.proto == "HTTP/1.0" {
		line = r.proto
	}
	host := r.host
	if host == "" {
		host = "test"
	}
	head := method + " " + target + " " + line + "\r\nHost: " + host + "\r\n" + r.fields
	switch {
	case r.trailers != "":
		head += "Transfer-Encoding: chunked\r\n"
	case r.body != "":
		head += "Content-Length: " + strconv.Itoa(len(r.body)) + "\r\n"
	}
	head += "\r\n"
	var hr h1.Request
	if err := h1.ParseRequest([]byte(head), &hr); err != nil {
		panic(err)
	}
	client := r.client
	if client == "" {
		client = "127.0.0.1:40000"
	}
	peer := c.NewPeer(netip.MustParseAddrPort(client), r.tls)
	peer.Client = r.clientTLS
	proto := r.proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	x := &Exchange{Req: &hr, Peer: &peer, Proto: proto}
	d := &fakeDoor{x: x}
	x.Door = d
	if r.body != "" || r.trailers != "" {
		x.Body = &memBody{b: []byte(r.body), trailers: []byte(r.trailers)}
	}
	start := time.Now()
	o := c.Forward(x)
	return reply{status: d.status, body: d.body.String(), retryAfter: d.retryAfter, backend: d.backend,
		header: d.header, interim: d.interim, trailers: d.trailers, outcome: o, took: time.Since(start)}
}

// testPool is the settings relay's defaults give a pool, round-robin.
func testPool() PoolConfig {
	pc := poolConfig("test")
	pc.BreakerFailures, pc.BreakerOpenTime, pc.MaxEjectedPercent = 5, 30*time.Second, 50
	pc.MaxQueued, pc.QueueTimeout = 1024, 5*time.Second
	pc.RetryBudgetPercent, pc.RetryBudgetFloor = 20, 3
	return pc
}

// startPool makes a core whose one pool pc has the members bs.
func startPool(t *testing.T, pc PoolConfig, bs ...*backend.Backend) (*Core, *Pool) {
	t.Helper()
	return startCore(t, Config{}, pc, bs...)
}

// startCore is startPool with the core's settings cfg; a body of up to
// 64 KB is held unless cfg says otherwise.
func startCore(t *testing.T, cfg Config, pc PoolConfig, bs ...*backend.Backend) (*Core, *Pool) {
	t.Helper()
	if cfg.HoldBodyBytes == 0 {
		cfg.HoldBodyBytes = 64 << 10
	}
	c := New(cfg)
	p, err := c.AddPool(pc, bs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdle)
	return c, p
}

// testBackend is a backend server, the requests it has taken and the
// last of them as it arrived.
type testBackend struct {
	b    *backend.Backend
	hits atomic.Int64
	mu   sync.Mutex
	got  *http.Request
}

// last is the last request the backend took, its body read (so its
// trailers are in); nil before the first.
func (tb *testBackend) last() *http.Request {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.got
}

func memberAt(t *testing.T, addr string) *backend.Backend {
	t.Helper()
	b, err := backend.New(&url.URL{Scheme: "http", Host: addr}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serving starts a backend that answers 200 with its name, or what h
// answers when h is set.
func serving(t *testing.T, name string, h http.HandlerFunc) *testBackend {
	t.Helper()
	tb := &testBackend{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tb.hits.Add(1)
		io.Copy(io.Discard, r.Body)
		tb.mu.Lock()
		tb.got = r.Clone(context.Background())
		tb.mu.Unlock()
		w.Header().Set("X-Backend", name)
		if h != nil {
			h(w, r)
			return
		}
		fmt.Fprint(w, name)
	}))
	t.Cleanup(srv.Close)
	tb.b = memberAt(t, srv.Listener.Addr().String())
	return tb
}

// refusing is a backend whose address refuses connections.
func refusing(t *testing.T) *testBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return &testBackend{b: memberAt(t, addr)}
}

// resetting is a backend that reads each request head and resets the
// connection without answering; hits counts the requests it took.
func resetting(t *testing.T) *testBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	tb := &testBackend{b: memberAt(t, ln.Addr().String())}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
				}
				tb.hits.Add(1)
				c.(*net.TCPConn).SetLinger(0) // reset, not a clean close
			}()
		}
	}()
	return tb
}

// loopback is the trusted proxy of tests that trust one: the fake door's
// clients are on 127.0.0.1.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

// memLog is an access log written to memory.
type memLog struct {
	*logging.AccessLog
	buf bytes.Buffer
}

func newMemLog() *memLog {
	m := &memLog{}
	m.AccessLog = logging.NewAccessLog(&m.buf)
	return m
}

// logLines closes m and decodes each of its lines into a T.
func logLines[T any](t *testing.T, m *memLog) []T {
	t.Helper()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	var lines []T
	for _, raw := range strings.Split(strings.TrimSpace(m.buf.String()), "\n") {
		var l T
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("access log line %q: %v", raw, err)
		}
		lines = append(lines, l)
	}
	return lines
}

// eventually polls cond every 5 ms for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
