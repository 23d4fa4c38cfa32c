package trace

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// exportAll exports spans 0..n-1 through one reused Span, overwriting its
// bytes after each call as the core's next request would.
func exportAll(e *Exporter, n int) {
	m := newSpanMaker()
	for i := range n {
		e.Export(m.make(i))
		m.scribble()
	}
}

func closeWithin(t *testing.T, e *Exporter, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestExporterDelivers sends 10,000 spans over each protocol, with and
// without TLS, to a real receiver on loopback, which must get each exactly
// once with its ids and attributes, the resource, and the headers.
func TestExporterDelivers(t *testing.T) {
	const n = 10_000
	tests := []struct {
		name  string
		start func(t *testing.T, c *collector) ExporterConfig
	}{
		{name: "grpc", start: func(t *testing.T, c *collector) ExporterConfig {
			ln := listen(t)
			serveGRPC(t, c, ln)
			return ExporterConfig{Protocol: "grpc", Endpoint: ln.Addr().String(), Insecure: true}
		}},
		{name: "grpc over TLS", start: func(t *testing.T, c *collector) ExporterConfig {
			cert, caFile := testCert(t)
			ln := listen(t)
			serveGRPC(t, c, ln, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
			return ExporterConfig{Protocol: "grpc", Endpoint: ln.Addr().String(), CAFile: caFile, ServerName: "example.com"}
		}},
		{name: "http", start: func(t *testing.T, c *collector) ExporterConfig {
			srv := httptest.NewServer(c)
			t.Cleanup(srv.Close)
			return ExporterConfig{Protocol: "http", Endpoint: srv.URL + "/"}
		}},
		{name: "http over TLS", start: func(t *testing.T, c *collector) ExporterConfig {
			srv := httptest.NewTLSServer(c)
			t.Cleanup(srv.Close)
			return ExporterConfig{Protocol: "http", Endpoint: srv.URL, CAFile: caFileOf(t, srv), ServerName: "example.com"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &collector{}
			cfg := tt.start(t, c)
			cfg.Headers = map[string]string{"X-Api-Key": "s3cret"}
			cfg.QueueSize = n // room for all: this test is about delivery, not drops
			cfg.BatchTimeout = 50 * time.Millisecond
			cfg.ServiceName = "edge"
			cfg.ResourceAttributes = map[string]string{"deployment.environment.name": "test"}
			var log logLines
			e, err := NewExporter(cfg, slog.New(&log))
			if err != nil {
				t.Fatal(err)
			}
			exportAll(e, n)
			eventually(t, 30*time.Second, "spans delivered", func() bool { return e.Exported() == n })
			closeWithin(t, e, 10*time.Second)
			accounted(t, e, n)
			if e.Dropped() != 0 || e.Failed() != 0 {
				t.Fatalf("dropped %d, failed %d", e.Dropped(), e.Failed())
			}
			if lines := log.all(); len(lines) != 0 {
				t.Fatalf("log lines: %q", lines)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			checkSpans(t, c.spans, n)
			if got := len(c.resources); got < n/DefaultBatchSize {
				t.Fatalf("%d requests for %d spans: batches too small", got, n)
			}
			for _, r := range c.resources {
				a := attrsOf(r.Attributes)
				if a["service.name"] != "edge" || a["deployment.environment.name"] != "test" || len(a) != 2 {
					t.Fatalf("resource %v", a)
				}
			}
			for _, h := range c.headers {
				if h["x-api-key"] != "s3cret" || !strings.HasPrefix(h["user-agent"], userAgent) {
					t.Fatalf("headers %v", h)
				}
			}
		})
	}
}

// TestExporterCollectorDown: with nothing listening, Export stays quick,
// spans are dropped or fail and are counted, and the log gets a line or
// two, not one per span; once a collector listens there, spans arrive.
func TestExporterCollectorDown(t *testing.T) {
	tests := []struct {
		name     string
		protocol string
	}{
		{name: "grpc", protocol: "grpc"},
		{name: "http", protocol: "http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr, startListening := reservePort(t)
			cfg := ExporterConfig{Protocol: "grpc", Endpoint: addr, Insecure: true, QueueSize: 1024, BatchSize: 128, BatchTimeout: 10 * time.Millisecond}
			if tt.protocol == "http" {
				cfg.Protocol, cfg.Endpoint, cfg.Insecure = "http", "http://"+addr, false
			}
			var log logLines
			e, err := NewExporter(cfg, slog.New(&log))
			if err != nil {
				t.Fatal(err)
			}
			const n = 100_000
			m := newSpanMaker()
			s := m.make(1)
			start := time.Now()
			slowest := time.Duration(0)
			for range n {
				t0 := time.Now()
				e.Export(s)
				slowest = max(slowest, time.Since(t0))
			}
			took := time.Since(start)
			t.Logf("%d Export calls in %v (%v each), slowest %v; dropped %d, failed %d",
				n, took, took/n, slowest, e.Dropped(), e.Failed())
			if took > 10*time.Second {
				t.Fatalf("%d Export calls took %v", n, took)
			}
			if e.made.Load() > int64(cfg.QueueSize) {
				t.Fatalf("%d records for a queue of %d", e.made.Load(), cfg.QueueSize)
			}
			eventually(t, 10*time.Second, "every span dropped or failed", func() bool { return e.Dropped()+e.Failed() == n })
			if e.Exported() != 0 || e.Dropped() == 0 && e.Failed() == 0 {
				t.Fatalf("exported %d, dropped %d, failed %d", e.Exported(), e.Dropped(), e.Failed())
			}
			lines := log.all()
			if len(lines) == 0 || len(lines) > 2 {
				t.Fatalf("%d log lines, want 1 or 2: %q", len(lines), lines)
			}
			for _, l := range lines {
				if !strings.Contains(l, addr) {
					t.Fatalf("line %q does not name the collector", l)
				}
			}

			c := &collector{}
			ln := startListening()
			if tt.protocol == "grpc" {
				serveGRPC(t, c, ln)
			} else {
				srv := &http.Server{Handler: c}
				go srv.Serve(ln)
				t.Cleanup(func() { srv.Close() })
			}
			// gRPC tries again within reconnectBackoff's 5 s.
			eventually(t, 30*time.Second, "spans after the collector came up", func() bool {
				e.Export(s)
				return e.Exported() > 0
			})
			if got := len(log.all()); got > 2 {
				t.Fatalf("%d log lines: %q", got, log.all())
			}
			closeWithin(t, e, 10*time.Second)
			if c.count() != int(e.Exported()) {
				t.Fatalf("collector got %d, exporter counts %d", c.count(), e.Exported())
			}
		})
	}
}

// TestExporterSlowCollector: a collector that takes no batch leaves
// Export as quick as ever, and the spans held bounded by the queue; when it
// answers again, what was held goes through.
func TestExporterSlowCollector(t *testing.T) {
	tests := []struct {
		name     string
		protocol string
	}{
		{name: "grpc", protocol: "grpc"},
		{name: "http", protocol: "http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &collector{block: make(chan struct{})}
			cfg := ExporterConfig{QueueSize: 1000, BatchSize: 100, BatchTimeout: 10 * time.Millisecond, ExportTimeout: time.Minute}
			if tt.protocol == "grpc" {
				ln := listen(t)
				serveGRPC(t, c, ln)
				cfg.Protocol, cfg.Endpoint, cfg.Insecure = "grpc", ln.Addr().String(), true
			} else {
				srv := httptest.NewServer(c)
				t.Cleanup(srv.Close)
				cfg.Protocol, cfg.Endpoint = "http", srv.URL
			}
			var log logLines
			e, err := NewExporter(cfg, slog.New(&log))
			if err != nil {
				t.Fatal(err)
			}
			released := false
			release := func() {
				if !released {
					close(c.block)
					released = true
				}
			}
			defer release()
			const n = 100_000
			m := newSpanMaker()
			start := time.Now()
			for i := range n {
				e.Export(m.make(i % 50))
				if i == 500 {
					eventually(t, 10*time.Second, "a batch stuck in the collector", func() bool { return c.calls.Load() > 0 })
				}
			}
			took := time.Since(start)
			t.Logf("%d Export calls in %v with the collector stalled; dropped %d", n, took, e.Dropped())
			if took > 10*time.Second {
				t.Fatalf("%d Export calls took %v", n, took)
			}
			if held := e.made.Load(); held > int64(cfg.QueueSize) || len(e.queue) > cfg.QueueSize {
				t.Fatalf("%d records, %d queued, for a queue of %d", held, len(e.queue), cfg.QueueSize)
			}
			if d := e.Dropped(); d < n-uint64(cfg.QueueSize) {
				t.Fatalf("dropped %d of %d with a queue of %d", d, n, cfg.QueueSize)
			}
			// The drop line waits for the stalled send, and goes out at Close.
			release()
			closeWithin(t, e, 20*time.Second)
			accounted(t, e, n)
			if e.Failed() != 0 || c.count() != int(e.Exported()) || e.Exported() == 0 {
				t.Fatalf("exported %d, failed %d, collector got %d", e.Exported(), e.Failed(), c.count())
			}
			lines := log.all()
			if len(lines) != 1 || !strings.Contains(lines[0], "span queue full") {
				t.Fatalf("log lines %q, want one about the queue", lines)
			}
		})
	}
}

// TestExporterCloseGivesUp: Close against a collector that never answers
// returns when its context ends, with an error, having stopped everything.
func TestExporterCloseGivesUp(t *testing.T) {
	c := &collector{block: make(chan struct{})}
	defer close(c.block)
	ln := listen(t)
	serveGRPC(t, c, ln)
	baseline := runtime.NumGoroutine()
	e, err := NewExporter(ExporterConfig{Endpoint: ln.Addr().String(), Insecure: true, BatchTimeout: 10 * time.Millisecond, ExportTimeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	exportAll(e, 2000)
	eventually(t, 10*time.Second, "a batch stuck in the collector", func() bool { return c.calls.Load() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := e.Close(ctx); err == nil {
		t.Fatal("Close reported no error with spans unsent")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v past its context", took)
	}
	accounted(t, e, 2000)
	e.Export(newSpanMaker().make(1)) // after Close: dropped, no panic
	accounted(t, e, 2001)
	noLeaks(t, baseline)
}

// TestExporterFailures: a collector that refuses a batch has it counted as
// failed and logged once, with its answer; one that rejects some spans has
// those counted.
func TestExporterFailures(t *testing.T) {
	refuse := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "collector overloaded", http.StatusServiceUnavailable)
	})
	srv := httptest.NewServer(refuse)
	defer srv.Close()
	var log logLines
	e, err := NewExporter(ExporterConfig{Protocol: "http", Endpoint: srv.URL, BatchSize: 10, BatchTimeout: 10 * time.Millisecond}, slog.New(&log))
	if err != nil {
		t.Fatal(err)
	}
	exportAll(e, 100)
	eventually(t, 10*time.Second, "batches failed", func() bool { return e.Failed() == 100 })
	closeWithin(t, e, 5*time.Second)
	lines := log.all()
	if len(lines) != 2 || !strings.Contains(lines[0], "503") || !strings.Contains(lines[0], "collector overloaded") ||
		!strings.Contains(lines[1], "failed=") {
		// The first failure at once, the rest in Close's summary line.
		t.Fatalf("log lines %q", lines)
	}

	c := &collector{partial: 3}
	ln := listen(t)
	serveGRPC(t, c, ln)
	e, err = NewExporter(ExporterConfig{Endpoint: ln.Addr().String(), Insecure: true, BatchSize: 10, BatchTimeout: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	exportAll(e, 100)
	closeWithin(t, e, 5*time.Second)
	accounted(t, e, 100)
	if calls := c.calls.Load(); e.Failed() != uint64(3*calls) || e.Exported() != uint64(100-3*calls) {
		t.Fatalf("exported %d, failed %d in %d requests rejecting 3 each", e.Exported(), e.Failed(), calls)
	}
}

// TestExporterNoLeaks: after Close, none of the exporter's goroutines nor
// its connections' remain, over either protocol.
func TestExporterNoLeaks(t *testing.T) {
	tests := []struct {
		name     string
		protocol string
	}{
		{name: "grpc", protocol: "grpc"},
		{name: "http", protocol: "http"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &collector{}
			var cfg ExporterConfig
			if tt.protocol == "grpc" {
				ln := listen(t)
				serveGRPC(t, c, ln)
				cfg = ExporterConfig{Endpoint: ln.Addr().String(), Insecure: true}
			} else {
				srv := httptest.NewServer(c)
				t.Cleanup(srv.Close)
				cfg = ExporterConfig{Protocol: "http", Endpoint: srv.URL}
			}
			baseline := runtime.NumGoroutine()
			for range 3 {
				e, err := NewExporter(cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				exportAll(e, 1000)
				closeWithin(t, e, 10*time.Second)
				accounted(t, e, 1000)
				if e.Exported() != 1000 {
					t.Fatalf("exported %d", e.Exported())
				}
			}
			noLeaks(t, baseline)
		})
	}
}

// TestExportAllocs: once the queue's records exist, Export copies a span
// with no allocation, and drops one with none either.
func TestExportAllocs(t *testing.T) {
	const size = 4
	e := &Exporter{cfg: ExporterConfig{QueueSize: size}, free: make(chan *record, size), queue: make(chan *record, size)}
	m := newSpanMaker()
	s := m.make(10) // with an event and a tracestate
	for range size {
		e.Export(s)
	}
	for range size {
		e.recycle(<-e.queue)
	}
	if n := testing.AllocsPerRun(1000, func() {
		e.Export(s)
		e.recycle(<-e.queue)
	}); n != 0 {
		t.Fatalf("Export: %v allocations per span, want 0", n)
	}
	for range size {
		e.Export(s)
	}
	if n := testing.AllocsPerRun(1000, func() { e.Export(s) }); n != 0 {
		t.Fatalf("Export into a full queue: %v allocations, want 0", n)
	}
}

// BenchmarkExporter measures a sampled span's whole cost on relay's side,
// Export to the collector's answer, over each protocol against a receiver
// that reads and throws away what it gets (its allocations are counted
// too, a few per request).
func BenchmarkExporter(b *testing.B) {
	for _, protocol := range []string{"grpc", "http"} {
		b.Run(protocol, func(b *testing.B) {
			var cfg ExporterConfig
			if protocol == "grpc" {
				ln := listen(b)
				// Every call is unknown to this server, and read by a codec
				// that keeps nothing.
				s := grpc.NewServer(grpc.ForceServerCodec(discardCodec{}),
					grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
						var m struct{}
						if err := stream.RecvMsg(&m); err != nil {
							return err
						}
						return stream.SendMsg(&m)
					}))
				go s.Serve(ln)
				defer s.Stop()
				cfg = ExporterConfig{Endpoint: ln.Addr().String(), Insecure: true}
			} else {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
				}))
				defer srv.Close()
				cfg = ExporterConfig{Protocol: "http", Endpoint: srv.URL}
			}
			cfg.QueueSize, cfg.BatchTimeout = 1<<16, 10*time.Millisecond
			e, err := NewExporter(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			spans := make([]*Span, 100)
			for i := range spans {
				spans[i] = newSpanMaker().make(i)
			}
			// Warm up: every record made, the encoder grown, connections up.
			for i := range cfg.QueueSize {
				e.Export(spans[i%len(spans)])
			}
			waitSent(b, e, uint64(cfg.QueueSize))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			sent := uint64(cfg.QueueSize)
			for i := 0; i < b.N; i++ {
				e.Export(spans[i%len(spans)])
				if i%(cfg.QueueSize/2) == 0 {
					waitSent(b, e, sent+uint64(i))
				}
			}
			waitSent(b, e, sent+uint64(b.N))
			b.StopTimer()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N), "allocs/span")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N), "B/span")
			if e.Dropped() != 0 || e.Failed() != 0 {
				b.Fatalf("dropped %d, failed %d", e.Dropped(), e.Failed())
			}
			e.Close(context.Background())
		})
	}
}

// discardCodec reads a message by throwing it away and writes an empty
// one, which is an ExportTraceServiceResponse of full success.
type discardCodec struct{}

func (discardCodec) Marshal(any) ([]byte, error) { return nil, nil }
func (discardCodec) Unmarshal([]byte, any) error { return nil }
func (discardCodec) Name() string                { return "proto" }

func waitSent(b *testing.B, e *Exporter, n uint64) {
	deadline := time.Now().Add(30 * time.Second)
	for e.Exported()+e.Dropped()+e.Failed() < n {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d spans sent", e.Exported(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// testCert is httptest's certificate (for example.com and 127.0.0.1) and
// a CA file that verifies it.
func testCert(t *testing.T) (tls.Certificate, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.StartTLS()
	defer srv.Close()
	return srv.TLS.Certificates[0], caFileOf(t, srv)
}

func caFileOf(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	p := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, p, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
