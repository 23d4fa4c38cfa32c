package dataplane

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/h2"
	"relay/internal/proxy"
	"relay/internal/testcert"
)

// ioTimeout bounds every read and write of the tests' clients.
const ioTimeout = 5 * time.Second

// seen is what an echo backend answers: who it is and the request it got.
type seen struct {
	Who     string      `json:"who"`
	Method  string      `json:"method"`
	Target  string      `json:"target"`
	Host    string      `json:"host"`
	Headers http.Header `json:"headers"`
}

// echo is a backend on 127.0.0.1 that answers every request with a seen
// (the target exactly as it arrived on the wire) and a few response fields
// for routes to change: X-Resp-Set, X-Resp-Drop and X-Who.
type echo struct {
	name string
	url  string
}

func startEcho(t testing.TB, name string) *echo {
	t.Helper()
	return &echo{name: name, url: serveBackend(t, echoHandler(name))}
}

// echoHandler answers as an echo backend does.
func echoHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Who", name)
		w.Header().Set("X-Resp-Set", "backend")
		w.Header().Set("X-Resp-Drop", "backend")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(seen{Who: name, Method: r.Method, Target: r.RequestURI, Host: r.Host, Headers: r.Header})
	})
}

// serveBackend serves h over HTTP/1.1 on a new port of 127.0.0.1 until
// the end of the test and returns its URL.
func serveBackend(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: ioTimeout}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// h2cTransport is a client transport that speaks HTTP/2 without TLS, with
// prior knowledge (h2c).
func h2cTransport() *http2.Transport {
	return &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
}

// echoes starts one echo backend per name and returns a replacer that turns
// "$name" in a YAML text into that backend's URL.
func echoes(t testing.TB, names ...string) (*strings.Replacer, map[string]*echo) {
	t.Helper()
	var pairs []string
	m := map[string]*echo{}
	// Longer names first, so that "$ab" is not taken for "$a" then "b".
	for _, n := range names {
		e := startEcho(t, n)
		m[n] = e
		pairs = append(pairs, "$"+n, e.url)
	}
	sortPairsLongestFirst(pairs)
	return strings.NewReplacer(pairs...), m
}

func sortPairsLongestFirst(p []string) {
	for i := 0; i < len(p); i += 2 {
		for j := i + 2; j < len(p); j += 2 {
			if len(p[j]) > len(p[i]) {
				p[i], p[i+1], p[j], p[j+1] = p[j], p[j+1], p[i], p[i+1]
			}
		}
	}
}

// testRelay is a relay built as cmd/relay builds one: the data plane from
// a configuration, the HTTP/1.1 door over its core, and the HTTP/2 server
// behind it (h2c on the cleartext listener), serving on 127.0.0.1.
type testRelay struct {
	plane *Plane
	proxy *proxy.Proxy
	addr  string
}

// startRelay parses yml (h2c is turned on for it) and serves it.
func startRelay(t testing.TB, yml string, opts Options) *testRelay {
	t.Helper()
	cfg := parse(t, "h2c: true\n"+yml)
	pl, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pl.Close)
	front := proxy.OptionsFrom(cfg)
	p, err := proxy.New(front, pl.Core())
	if err != nil {
		t.Fatal(err)
	}
	p.SetHTTP2(h2.NewServer(pl.Core(), front.BodyTime(), h2.Limits{
		MaxConcurrentStreams: 100, MaxHeaderBytes: cfg.MaxHeaderBytes,
		IdleTimeout: cfg.IdleTimeout, HeaderTimeout: cfg.ClientHeaderTimeout,
	}, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		p.Shutdown(ctx)
		<-served
	})
	return &testRelay{plane: pl, proxy: p, addr: ln.Addr().String()}
}

// waitFor polls cond until it holds, failing the test after ioTimeout.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// serveTLS opens a TLS listener on the relay with a certificate for
// www.example.com and api.example.com from a new CA, offering h2 and
// http/1.1, and returns a dialer for it: a TLS client with SNI sni that
// asks for proto by ALPN.
func (r *testRelay) serveTLS(t testing.TB) func(sni, proto string) net.Conn {
	t.Helper()
	ca := testcert.NewCA(t)
	pair := ca.Server(t, testcert.ECDSA, "www.example.com", "api.example.com")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go r.proxy.ServeTLS(ln, &tls.Config{Certificates: []tls.Certificate{pair.TLS}, NextProtos: []string{"h2", "http/1.1"}})
	return func(sni, proto string) net.Conn {
		t.Helper()
		tc := tls.Client(dialTCP(t, ln.Addr().String()), &tls.Config{RootCAs: ca.Pool, ServerName: sni, NextProtos: []string{proto}})
		if err := tc.Handshake(); err != nil {
			t.Fatal(err)
		}
		if got := tc.ConnectionState().NegotiatedProtocol; got != proto {
			t.Fatalf("ALPN chose %q, want %q", got, proto)
		}
		return tc
	}
}
