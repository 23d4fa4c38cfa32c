package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/h2"
	"relay/internal/testcert"
	"relay/internal/tlsconf"
)

// tlsRelay is a front door serving TLS (HTTP/1.1 and, by ALPN, HTTP/2)
// over bs, with a client trusting its certificate.
type tlsRelay struct {
	p    *Proxy
	addr string
	ca   *testcert.CA
}

func startTLSRelay(t *testing.T, cfg Config, bs ...*backend.Backend) *tlsRelay {
	t.Helper()
	ca := testcert.NewCA(t)
	pair := ca.Server(t, testcert.ECDSA, "relay.test")
	certs, err := tlsconf.NewServer([]config.Certificate{{CertFile: pair.CertFile, KeyFile: pair.KeyFile}}, "1.2")
	if err != nil {
		t.Fatal(err)
	}
	cfg = withDefaults(cfg)
	p, err := build(cfg, bs)
	if err != nil {
		t.Fatal(err)
	}
	p.SetHTTP2(h2.NewServer(p.Core(), cfg.BodyTime(), h2.Limits{
		MaxConcurrentStreams: 100, MaxHeaderBytes: cfg.MaxHeaderBytes, IdleTimeout: cfg.IdleTimeout, HeaderTimeout: cfg.HeaderTimeout,
	}, nil))
	ln := listen(t)
	served := make(chan error, 1)
	go func() { served <- p.ServeTLS(ln, certs.Config()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != ErrServerClosed {
			t.Errorf("ServeTLS returned %v", err)
		}
	})
	return &tlsRelay{p: p, addr: ln.Addr().String(), ca: ca}
}

func (r *tlsRelay) dial(t *testing.T, protos ...string) *tls.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", r.addr, &tls.Config{RootCAs: r.ca.Pool, ServerName: "relay.test", NextProtos: protos})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A large download streams through TLS, over HTTP/1.1 and over HTTP/2,
// with relay's memory bounded.
func TestLargeDownloadStreamsOverTLSAndHTTP2(t *testing.T) {
	size := streamSize()
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		c.SetDeadline(time.Now().Add(2 * time.Minute))
		for {
			if _, err := rb.next(br); err != nil {
				return
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
			if writePattern(c, size) != nil {
				return
			}
		}
	})
	r := startTLSRelay(t, Config{}, rb.b)
	for _, h2 := range []bool{false, true} {
		tr := &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: r.ca.Pool, ServerName: "relay.test"},
			ForceAttemptHTTP2: h2,
			DialTLSContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				protos := []string{"http/1.1"}
				if h2 {
					protos = []string{"h2"}
				}
				return r.dial(t, protos...), nil
			},
		}
		m := watchMemory()
		start := time.Now()
		res, err := (&http.Client{Transport: tr}).Get("https://relay.test/download")
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 1, true: 2}[h2]; res.ProtoMajor != want {
			t.Errorf("answered over %s", res.Proto)
		}
		if err := checkPattern(res.Body, size); err != nil {
			t.Fatalf("over %s: %v", res.Proto, err)
		}
		res.Body.Close()
		m.check(t)
		t.Logf("%d MiB down over TLS and %s in %v", size>>20, res.Proto, time.Since(start))
		tr.CloseIdleConnections()
	}
}

// A WebSocket-style upgrade through the TLS listener carries bytes both
// ways once the backend switches protocols.
func TestUpgradeOverTLS(t *testing.T) {
	reqs := make(chan *rawRequest, 1)
	rb := echoUpgradeBackend(t, reqs)
	r := startTLSRelay(t, Config{}, rb.b)
	c := r.dial(t, "http/1.1")
	br := bufio.NewReader(c)
	c.SetDeadline(time.Now().Add(ioTimeout))
	io.WriteString(c, "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	line, _, err := readHead(br)
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 101 ") {
		t.Fatalf("status line %q (%v), want 101", line, err)
	}
	if req := <-reqs; req.Header.Get("X-Forwarded-Proto") != "https" {
		t.Errorf("the backend got X-Forwarded-Proto %q", req.Header.Get("X-Forwarded-Proto"))
	}
	if got, _ := br.ReadString('\n'); got != "hi\n" {
		t.Fatalf("greeting %q", got)
	}
	for _, msg := range []string{"ping\n", strings.Repeat("x", 100<<10) + "\n"} {
		io.WriteString(c, msg)
		if got, err := br.ReadString('\n'); got != msg {
			t.Fatalf("echo of %d bytes: got %d bytes (%v)", len(msg), len(got), err)
		}
	}
}

// A tunnel through the TLS listener keeps half-closes: when the backend
// has finished sending, the client reads the end (close_notify) and may
// still send, and its bytes reach the backend.
func TestUpgradeOverTLSKeepsHalfClose(t *testing.T) {
	got := make(chan string, 1)
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		if _, err := rb.next(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nbye\n")
		c.(*net.TCPConn).CloseWrite()
		c.SetReadDeadline(time.Now().Add(ioTimeout))
		rest, _ := io.ReadAll(br)
		got <- string(rest)
	})
	r := startTLSRelay(t, Config{}, rb.b)
	c := r.dial(t, "http/1.1")
	c.SetDeadline(time.Now().Add(ioTimeout))
	io.WriteString(c, "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(c)
	if line, _, err := readHead(br); err != nil || !strings.HasPrefix(line, "HTTP/1.1 101 ") {
		t.Fatalf("status line %q (%v), want 101", line, err)
	}
	if rest, err := io.ReadAll(br); string(rest) != "bye\n" || err != nil {
		t.Fatalf("after the 101: %q (%v), want the backend's last words and a clean end", rest, err)
	}
	io.WriteString(c, "late words\n")
	c.CloseWrite()
	select {
	case s := <-got:
		if s != "late words\n" {
			t.Errorf("the backend got %q after its half-close, want the client's late words", s)
		}
	case <-time.After(ioTimeout):
		t.Fatal("the backend never saw the client's end")
	}
}

// Without an HTTP/2 server the TLS listener offers HTTP/1.1 only, so a
// client that prefers h2 is served HTTP/1.1.
func TestTLSWithoutHTTP2OffersHTTP1Only(t *testing.T) {
	hb := newHTTPBackend(t, "only", 1, nil)
	ca := testcert.NewCA(t)
	pair := ca.Server(t, testcert.RSA, "relay.test")
	certs, err := tlsconf.NewServer([]config.Certificate{{CertFile: pair.CertFile, KeyFile: pair.KeyFile}}, "1.3")
	if err != nil {
		t.Fatal(err)
	}
	p, err := build(withDefaults(Config{}), []*backend.Backend{hb.b})
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	go p.ServeTLS(ln, certs.Config())
	defer p.Shutdown(context.Background())
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool, ServerName: "relay.test", NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st := c.ConnectionState(); st.NegotiatedProtocol != "http/1.1" || st.Version != tls.VersionTLS13 {
		t.Fatalf("negotiated %q over %x, want http/1.1 over TLS 1.3", st.NegotiatedProtocol, st.Version)
	}
	c.SetDeadline(time.Now().Add(ioTimeout))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64))
	if res.StatusCode != 200 || string(body) != "only" {
		t.Errorf("%d %q", res.StatusCode, body)
	}
}

// A front door built without a Logger discards what it would log, as
// Config says, rather than crash on the first failed handshake.
func TestFailedHandshakeWithoutLoggerIsDiscarded(t *testing.T) {
	hb := newHTTPBackend(t, "a", 1, nil)
	r := startTLSRelay(t, Config{}, backendsOf(hb)...)
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // not a TLS hello
	io.Copy(io.Discard, c)
	tc := r.dial(t, "http/1.1")
	io.WriteString(tc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := readResponse(t, bufio.NewReader(tc), "GET"); resp.StatusCode != 200 {
		t.Fatalf("after a failed handshake: %d, want 200", resp.StatusCode)
	}
}
