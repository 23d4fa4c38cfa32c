package main

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"relay/internal/testcert"
)

// TestCountsWhatTheServerAnswered: h3load against an HTTP/3 server of
// quic-go's on loopback, 3 connections x 4 streams for 1 s: every request
// it counts the server answered, the server answered at most the 12 in
// flight at the end more, the 404s of another path are counted as 4xx,
// and the server saw 3 connections.
func TestCountsWhatTheServerAnswered(t *testing.T) {
	ca := testcert.NewCA(t)
	pair := ca.Server(t, testcert.ECDSA, "127.0.0.1", "localhost")
	var served, conns atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		served.Add(1)
		w.Write([]byte("hello\n"))
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: pc}
	ln, err := tr.ListenEarly(http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{pair.TLS}}), &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http3.Server{Handler: mux, ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
		conns.Add(1)
		return ctx
	}}
	go srv.ServeListener(ln)
	t.Cleanup(func() { srv.Close(); tr.Close(); pc.Close() })

	base := "https://127.0.0.1:" + strings.Split(pc.LocalAddr().String(), ":")[1]
	o := Options{URL: base + "/", Conns: 3, Streams: 4, Duration: time.Second, Timeout: 2 * time.Second, Roots: ca.Pool}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(Report(o, r)))
	if r.Requests == 0 || r.Errors != 0 || r.Status[2] != r.Requests {
		t.Fatalf("requests %d, errors %d (%v), 2xx %d", r.Requests, r.Errors, r.FirstErr, r.Status[2])
	}
	s := uint64(served.Load())
	if s < r.Requests || s > r.Requests+uint64(o.Conns*o.Streams) {
		t.Errorf("the server answered %d, h3load counted %d with %d in flight", s, r.Requests, o.Conns*o.Streams)
	}
	if n := conns.Load(); n != int64(o.Conns) {
		t.Errorf("the server saw %d connections, want %d", n, o.Conns)
	}
	if p50, p99 := r.Latencies.Quantile(0.5), r.Latencies.Quantile(0.99); p50 <= 0 || p99 < p50 {
		t.Errorf("p50 %v, p99 %v", p50, p99)
	}

	o.URL, o.Duration = base+"/missing", 200*time.Millisecond
	r, err = Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests == 0 || r.Status[4] != r.Requests {
		t.Errorf("for a missing path: %d requests, 4xx %d", r.Requests, r.Status[4])
	}

	// A server's certificate that does not verify is an error, counted.
	o.URL, o.Roots = base+"/", nil
	r, err = Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Requests != 0 || r.Errors == 0 || r.FirstErr == nil {
		t.Errorf("against an untrusted certificate: %d requests, %d errors, %v", r.Requests, r.Errors, r.FirstErr)
	}
}

// TestHistogramQuantiles: of 1,001 latencies, the 501st and the 991st
// (50.1 and 99.1 ms) fall in buckets whose upper edges are 10 µs above;
// the slowest, past 1 s, in the last.
func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Add(time.Duration(i) * 100 * time.Microsecond) // 0.1 ms .. 100 ms
	}
	h.Add(3 * time.Second)
	for q, want := range map[float64]time.Duration{0.5: 50*time.Millisecond + 110*time.Microsecond, 0.99: 99*time.Millisecond + 110*time.Microsecond, 1: time.Second + 10*time.Microsecond} {
		if got := h.Quantile(q); got != want {
			t.Errorf("q%v = %v, want %v", q, got, want)
		}
	}
}
