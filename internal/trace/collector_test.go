package trace

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// collector is a test's OTLP receiver: what it was sent, and at will a
// stall in every export until it is let go.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer

	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []*resourcepb.Resource
	headers   []map[string]string // of each request, names lower case

	calls   atomic.Int64
	block   chan struct{} // non-nil: exports wait until it is closed
	partial int64         // spans each request rejects
}

func (c *collector) take(req *coltracepb.ExportTraceServiceRequest, headers map[string]string) *coltracepb.ExportTraceServiceResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		c.resources = append(c.resources, rs.Resource)
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.headers = append(c.headers, headers)
	resp := &coltracepb.ExportTraceServiceResponse{}
	if c.partial > 0 {
		resp.PartialSuccess = &coltracepb.ExportTracePartialSuccess{RejectedSpans: c.partial, ErrorMessage: "too old"}
	}
	return resp
}

func (c *collector) wait(ctx context.Context) error {
	if c.block == nil {
		return nil
	}
	select {
	case <-c.block:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Export is the gRPC service's.
func (c *collector) Export(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.calls.Add(1)
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	md, _ := metadata.FromIncomingContext(ctx)
	h := map[string]string{}
	for k, v := range md {
		h[k] = strings.Join(v, ",")
	}
	return c.take(req, h), nil
}

// ServeHTTP is OTLP/HTTP's, checking the request as a collector would.
func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.calls.Add(1)
	if err := c.wait(r.Context()); err != nil {
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("unexpected %s %s with %q", r.Method, r.URL.Path, r.Header.Get("Content-Type")), http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h := map[string]string{}
	for k := range r.Header {
		h[strings.ToLower(k)] = r.Header.Get(k)
	}
	out, _ := proto.Marshal(c.take(&req, h))
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.spans)
}

// serveGRPC serves c's gRPC service on ln until the test ends.
func serveGRPC(t *testing.T, c *collector, ln net.Listener, opts ...grpc.ServerOption) *grpc.Server {
	t.Helper()
	s := grpc.NewServer(opts...)
	coltracepb.RegisterTraceServiceServer(s, c)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return s
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// reservePort returns a loopback address where connections are refused
// until listen is called: its port is held by a socket bound but not
// listening, so no other test can take it meanwhile.
func reservePort(t *testing.T) (addr string, listen func() net.Listener) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	owned := true
	t.Cleanup(func() {
		if owned {
			syscall.Close(fd)
		}
	})
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr = "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	return addr, func() net.Listener {
		if err := syscall.Listen(fd, 128); err != nil {
			t.Fatal(err)
		}
		owned = false
		f := os.NewFile(uintptr(fd), addr)
		defer f.Close()
		ln, err := net.FileListener(f)
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
}

// logLines is a slog destination a test counts lines in.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, b.String())
	l.mu.Unlock()
	return nil
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// spanMaker fills one reused Span as relay's core does, its strings views
// of one reused buffer, so that an exporter that kept them instead of
// copying would send another span's bytes.
type spanMaker struct {
	s   Span
	buf []byte
	at  time.Time
}

func newSpanMaker() *spanMaker {
	return &spanMaker{buf: make([]byte, 0, 256), at: time.Unix(1700000000, 0)}
}

// idsOf are the ids of span i.
func idsOf(i int) (TraceID, SpanID, SpanID) {
	var t TraceID
	var s, p SpanID
	binary.BigEndian.PutUint64(t[:8], uint64(i)+1)
	binary.BigEndian.PutUint64(t[8:], 0xabcdef)
	binary.BigEndian.PutUint64(s[:], uint64(i)+1)
	if i%2 == 0 { // odd spans are roots: relay started their trace
		binary.BigEndian.PutUint64(p[:], uint64(i)+1<<32)
	}
	return t, s, p
}

func (m *spanMaker) make(i int) *Span {
	m.buf = m.buf[:0]
	view := func(parts ...string) string {
		start := len(m.buf)
		for _, p := range parts {
			m.buf = append(m.buf, p...)
		}
		return unsafe.String(&m.buf[start], len(m.buf)-start)
	}
	n := strconv.Itoa(i)
	events := m.s.Events[:0]
	if i%10 == 0 {
		events = append(events, Event{Time: m.at, Backend: view("10.0.0.", n), Reason: view("refused ", n)})
	}
	m.s = Span{
		Events: events,
		Start:  m.at.Add(time.Duration(i) * time.Microsecond), End: m.at.Add(time.Duration(i+100) * time.Microsecond),
		Method: "GET", Target: view("/item/", n, "?q=1"), Host: view("shop", n, ".example:8080"),
		Scheme: "http", Proto: "HTTP/1.1", Status: 200 + i%2, Route: view("route", n), Pool: view("pool", n),
		Backend: view("backend", n), Retries: len(events), RequestID: view("req", n), ClientAddr: view("192.0.2.1:", strconv.Itoa(1024+i%60000)),
	}
	m.s.Trace, m.s.ID, m.s.Parent = idsOf(i)
	m.s.Flags = FlagSampled | FlagRandom
	if i%3 == 0 {
		m.s.TraceState = []byte("k=" + n)
	}
	return &m.s
}

// scribble overwrites the maker's buffer, as the core's next request
// overwrites its buffers.
func (m *spanMaker) scribble() {
	for i := range m.buf {
		m.buf[i] = 'X'
	}
}

// checkSpans checks that got are exactly spans 0..n-1 of spanMaker, each
// once with its own ids and attributes.
func checkSpans(t *testing.T, got []*tracepb.Span, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("collector got %d spans, want %d", len(got), n)
	}
	seen := make([]bool, n)
	for _, sp := range got {
		i := int(binary.BigEndian.Uint64(sp.SpanId)) - 1
		if i < 0 || i >= n || seen[i] {
			t.Fatalf("span id %x unexpected or repeated", sp.SpanId)
		}
		seen[i] = true
		tr, id, parent := idsOf(i)
		if string(sp.TraceId) != string(tr[:]) || string(sp.SpanId) != string(id[:]) || string(sp.ParentSpanId) != string(parent[:]) && !(parent.IsZero() && len(sp.ParentSpanId) == 0) {
			t.Fatalf("span %d: ids %x %x %x", i, sp.TraceId, sp.SpanId, sp.ParentSpanId)
		}
		s := strconv.Itoa(i)
		a := attrsOf(sp.Attributes)
		want := map[string]any{
			"http.request.method": "GET", "url.path": "/item/" + s, "url.scheme": "http",
			"server.address": "shop" + s + ".example", "server.port": int64(8080), "network.protocol.version": "1.1",
			"client.address": "192.0.2.1", "client.port": int64(1024 + i%60000), "http.response.status_code": int64(200 + i%2),
			"relay.route": "route" + s, "relay.pool": "pool" + s, "relay.backend": "backend" + s,
			"relay.retries": int64(0), "relay.request_id": "req" + s,
		}
		if i%10 == 0 {
			want["relay.retries"] = int64(1)
		}
		for k, v := range want {
			if a[k] != v {
				t.Fatalf("span %d: %s = %v, want %v (all: %v)", i, k, a[k], v, a)
			}
		}
		if len(a) != len(want) {
			t.Fatalf("span %d: attributes %v, want %v", i, a, want)
		}
		if sp.Name != "GET route"+s || sp.Kind != tracepb.Span_SPAN_KIND_SERVER ||
			sp.StartTimeUnixNano != uint64(time.Unix(1700000000, int64(i)*1000).UnixNano()) {
			t.Fatalf("span %d: name %q kind %v start %d", i, sp.Name, sp.Kind, sp.StartTimeUnixNano)
		}
		if wantTS := map[bool]string{true: "k=" + s}[i%3 == 0]; sp.TraceState != wantTS {
			t.Fatalf("span %d: tracestate %q, want %q", i, sp.TraceState, wantTS)
		}
		if i%10 == 0 {
			if len(sp.Events) != 1 || attrsOf(sp.Events[0].Attributes)["relay.backend"] != "10.0.0."+s ||
				attrsOf(sp.Events[0].Attributes)["error.type"] != "refused "+s {
				t.Fatalf("span %d: events %v", i, sp.Events)
			}
		} else if len(sp.Events) != 0 {
			t.Fatalf("span %d: events %v", i, sp.Events)
		}
	}
}

// eventually polls cond every few milliseconds for up to limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noLeaks fails the test if goroutines started after baseline outlive
// it by long: the exporter's goroutine, gRPC's and the HTTP transport's.
func noLeaks(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), baseline, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// accounted checks that every span exported was dropped, failed or taken.
func accounted(t *testing.T, e *Exporter, n int) {
	t.Helper()
	if d, x, f := e.Dropped(), e.Exported(), e.Failed(); d+x+f != uint64(n) {
		t.Fatalf("dropped %d + exported %d + failed %d != %d", d, x, f, n)
	}
}
