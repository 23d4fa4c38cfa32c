package core

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/h1"
)

// A front door for tests of the core alone: requests are built in memory,
// answers are recorded, and the backends are real servers on 127.0.0.1.

// fakeDoor records what the core answers the client.
type fakeDoor struct {
	status     int
	retryAfter string // what relay's own 503 would carry
	body       bytes.Buffer
	backend    string // the X-Backend field of a backend's response
}

func (d *fakeDoor) Continue() error            { return nil }
func (d *fakeDoor) Interim(*h1.Response) error { return nil }
func (d *fakeDoor) Gone() bool                 { return false }

func (d *fakeDoor) Respond(resp *h1.Response, body *ResponseBody) (int64, error, error) {
	d.status = resp.Status
	for _, f := range resp.Fields {
		if string(f.Name) == "X-Backend" {
			d.backend = string(f.Value)
		}
	}
	n, _ := d.body.Write(body.Prefix())
	buf := make([]byte, 4096)
	for {
		k, err := body.Read(buf)
		d.body.Write(buf[:k])
		n += k
		if err == io.EOF {
			return int64(n), nil, nil
		}
		if err != nil {
			return int64(n), err, nil
		}
	}
}

func (d *fakeDoor) Tunnel(resp *h1.Response, up net.Conn, _ []byte) int64 {
	d.status = resp.Status
	up.Close()
	return 0
}

func (d *fakeDoor) Error(status int, msg string) (int64, error) {
	d.status = status
	if status == 503 {
		d.retryAfter = RetryAfter
	}
	b := AppendErrorBody(nil, status, msg)
	d.body.Write(b)
	return int64(len(b)), nil
}

// memBody is a request body held in memory.
type memBody struct {
	b    []byte
	done bool
}

func (m *memBody) Prefix() []byte   { return nil }
func (m *memBody) Done() bool       { return m.done }
func (m *memBody) Trailers() []byte { return nil }

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
	backend    string // the backend that answered (X-Backend)
	took       time.Duration
}

// send forwards one request through c as a front door would.
func send(c *Core, method, body string) reply {
	head := method + " / HTTP/1.1\r\nHost: test\r\n"
	if body != "" {
		head += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n"
	}
	head += "\r\n"
	var req h1.Request
	if err := h1.ParseRequest([]byte(head), &req); err != nil {
		panic(err)
	}
	d := &fakeDoor{}
	peer := c.NewPeer(netip.MustParseAddrPort("127.0.0.1:40000"), false)
	x := &Exchange{Req: &req, Door: d, Peer: &peer, Proto: "HTTP/1.1"}
	if body != "" {
		x.Body = &memBody{b: []byte(body)}
	}
	start := time.Now()
	c.Forward(x)
	return reply{status: d.status, body: d.body.String(), retryAfter: d.retryAfter, backend: d.backend, took: time.Since(start)}
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
	c := New(Config{HoldBodyBytes: 64 << 10})
	p, err := c.AddPool(pc, bs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdle)
	return c, p
}

// testBackend is a backend server and the requests it has taken.
type testBackend struct {
	b    *backend.Backend
	hits atomic.Int64
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
