package proxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/fds"
)

// cyclesBackend answers by path, on as many requests per connection as a
// client sends: /ok a small body, /close one with Connection: close, /cut
// a body broken off, /ws a switch to an echo protocol, /hang nothing until
// the connection ends, /stale an answer after which the backend drops
// the connection as an idle timeout would.
func cyclesBackend(t *testing.T) *rawBackend {
	return newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		for {
			req, err := rb.next(br)
			if err != nil {
				return
			}
			switch req.Target {
			case "/close":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
				return
			case "/cut":
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")
				return
			case "/ws":
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhi\n")
				io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{br})
				return
			case "/hang":
				c.SetDeadline(time.Time{})
				io.Copy(io.Discard, br)
				return
			case "/stale":
				io.WriteString(c, okResponse("ok"))
				return
			default:
				io.WriteString(c, okResponse("ok"))
			}
		}
	})
}

// expectPlacesBack waits until every place in budget has been given back,
// once relay's pooled connections are closed.
func expectPlacesBack(t *testing.T, budget *fds.Budget, closeIdle func()) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		closeIdle()
		if budget.Used() == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d places still taken in the descriptor budget with no connection open", budget.Used())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Every way a client or upstream connection ends gives its place in the
// descriptor budget back, exactly once: after many rounds of each, with
// the clients gone and the pooled connections closed, no place is taken.
// A place lost per round would, over days, make relay refuse everything;
// one given twice would let it past its limit.
func TestBudgetPlacesComeBackOverCleartext(t *testing.T) {
	const rounds = 30
	rb := cyclesBackend(t)
	budget := fds.New(10000)
	cfg := Config{Descriptors: budget, IdleTimeout: 2 * time.Second}
	r := startRelay(t, cfg, rb.b)
	closeIdle := r.p.core.CloseIdle

	ask := func(t *testing.T, c net.Conn, br *bufio.Reader, target string) *bufio.Reader {
		t.Helper()
		write(t, c, "GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n")
		return br
	}
	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"keep-alive requests", func(t *testing.T) {
			c, br := dialRelay(t, r)
			for range 3 {
				if resp, _ := readResponse(t, ask(t, c, br, "/ok"), "GET"); resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
			}
			c.Close()
		}},
		{"backend closes", func(t *testing.T) {
			c, br := dialRelay(t, r)
			readResponse(t, ask(t, c, br, "/close"), "GET")
			c.Close()
		}},
		{"body broken off", func(t *testing.T) {
			c, br := dialRelay(t, r)
			ask(t, c, br, "/cut")
			io.Copy(io.Discard, br)
			c.Close()
		}},
		{"stale pooled connection", func(t *testing.T) {
			c, br := dialRelay(t, r)
			readResponse(t, ask(t, c, br, "/stale"), "GET")
			readResponse(t, ask(t, c, br, "/ok"), "GET")
			write(t, c, "POST /stale HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx")
			readResponse(t, br, "POST")
			write(t, c, "POST /ok HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx")
			readResponse(t, br, "POST")
			c.Close()
		}},
		{"tunnel closed by the client", func(t *testing.T) {
			c, br := dialRelay(t, r)
			write(t, c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			if line, _, err := readHead(br); err != nil || !strings.HasPrefix(line, "HTTP/1.1 101") {
				t.Fatalf("%q %v", line, err)
			}
			br.ReadString('\n')
			write(t, c, "ping\n")
			br.ReadString('\n')
			c.Close()
		}},
		{"tunnel half-closed by the client", func(t *testing.T) {
			c, br := dialRelay(t, r)
			write(t, c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			readHead(br)
			br.ReadString('\n')
			c.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, br)
			c.Close()
		}},
		{"client gone while the backend hangs", func(t *testing.T) {
			c, br := dialRelay(t, r)
			ask(t, c, br, "/hang")
			time.Sleep(5 * time.Millisecond)
			c.Close()
		}},
		{"client gone mid-head", func(t *testing.T) {
			c, _ := dialRelay(t, r)
			write(t, c, "GET /ok HTTP/1.1\r\nHo")
			c.Close()
		}},
		{"h2c preface then gone", func(t *testing.T) {
			c, _ := dialRelay(t, r)
			write(t, c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
			c.Close()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var wg sync.WaitGroup
			for range rounds {
				wg.Go(func() { tc.run(t) })
			}
			wg.Wait()
			eventually(t, "every client connection to end", func() bool { return r.p.Connections() == 0 })
			expectPlacesBack(t, budget, closeIdle)
		})
	}
}

// The same over TLS: handshakes that fail or never finish, HTTP/1.1 and
// HTTP/2 over TLS, tunnels over TLS.
func TestBudgetPlacesComeBackOverTLS(t *testing.T) {
	const rounds = 30
	rb := cyclesBackend(t)
	budget := fds.New(10000)
	r := startTLSRelay(t, Config{Descriptors: budget, HeaderTimeout: 500 * time.Millisecond}, rb.b)
	closeIdle := r.p.core.CloseIdle
	dialTLS := func(t *testing.T, protos ...string) *tls.Conn {
		c, err := tls.Dial("tcp", r.addr, &tls.Config{RootCAs: r.ca.Pool, ServerName: "relay.test", NextProtos: protos})
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(ioTimeout))
		return c
	}
	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"handshake refused", func(t *testing.T) {
			c, err := net.Dial("tcp", r.addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(c, "GET / HTTP/1.1\r\n\r\n")
			io.Copy(io.Discard, c)
			c.Close()
		}},
		{"handshake never finished", func(t *testing.T) {
			c, err := net.Dial("tcp", r.addr)
			if err != nil {
				t.Fatal(err)
			}
			c.SetDeadline(time.Now().Add(ioTimeout))
			io.Copy(io.Discard, c) // relay ends it after HeaderTimeout
			c.Close()
		}},
		{"untrusting client", func(t *testing.T) {
			c, err := tls.Dial("tcp", r.addr, &tls.Config{ServerName: "relay.test"})
			if err == nil {
				c.Close()
			}
		}},
		{"HTTP/1.1 over TLS", func(t *testing.T) {
			c := dialTLS(t, "http/1.1")
			br := bufio.NewReader(c)
			for _, target := range []string{"/ok", "/stale", "/ok", "/close"} {
				io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n")
				readResponse(t, br, "GET")
			}
			c.Close()
		}},
		{"tunnel over TLS", func(t *testing.T) {
			c := dialTLS(t, "http/1.1")
			br := bufio.NewReader(c)
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			readHead(br)
			br.ReadString('\n')
			io.WriteString(c, "ping\n")
			br.ReadString('\n')
			c.Close()
		}},
		{"HTTP/2 over TLS", func(t *testing.T) {
			c := dialTLS(t, "h2")
			h := newH2Client(t, c)
			for i, target := range []string{"/ok", "/stale", "/cut", "/close", "/ok"} {
				h.get(uint32(2*i+1), target)
			}
			h.wait(5)
			c.Close()
		}},
		{"HTTP/2 streams reset while the backend hangs", func(t *testing.T) {
			c := dialTLS(t, "h2")
			h := newH2Client(t, c)
			h.get(1, "/hang")
			h.get(3, "/ok")
			h.wait(1)
			h.reset(1)
			c.Close()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var wg sync.WaitGroup
			for range rounds {
				wg.Go(func() { tc.run(t) })
			}
			wg.Wait()
			eventually(t, "every client connection to end", func() bool { return r.p.Connections() == 0 })
			expectPlacesBack(t, budget, closeIdle)
		})
	}
}

// h2Client speaks raw HTTP/2 frames to relay.
type h2Client struct {
	t    *testing.T
	c    net.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
	done map[uint32]bool
}

func newH2Client(t *testing.T, c net.Conn) *h2Client {
	h := &h2Client{t: t, c: c, fr: http2.NewFramer(c, c), done: make(map[uint32]bool)}
	h.enc = hpack.NewEncoder(&h.hbuf)
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	io.WriteString(c, http2.ClientPreface)
	h.fr.WriteSettings()
	return h
}

// get opens stream id with a GET of target.
func (h *h2Client) get(id uint32, target string) {
	h.hbuf.Reset()
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "x"}, {":path", target}} {
		h.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hbuf.Bytes(), EndStream: true, EndHeaders: true})
}

func (h *h2Client) reset(id uint32) { h.fr.WriteRSTStream(id, http2.ErrCodeCancel) }

// wait reads frames until n streams have ended, or the connection does.
func (h *h2Client) wait(n int) {
	for len(h.done) < n {
		f, err := h.fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			if f.StreamEnded() {
				h.done[f.StreamID] = true
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				h.done[f.StreamID] = true
			}
		case *http2.RSTStreamFrame:
			h.done[f.StreamID] = true
		case *http2.GoAwayFrame:
			return
		}
	}
}
