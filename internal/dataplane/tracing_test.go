package dataplane

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"relay/internal/grpctest"
	"relay/internal/h2test"
	"relay/internal/logging"
	"relay/internal/testaddr"
	"relay/internal/trace"
)

// otlpSink is a test's OTLP/gRPC receiver: the spans it was sent, in
// the order they came.
type otlpSink struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (s *otlpSink) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans = append(s.spans, ss.Spans...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

func (s *otlpSink) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.spans)
}

func (s *otlpSink) all() []*tracepb.Span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*tracepb.Span(nil), s.spans...)
}

// byID returns the spans received, by span id.
func (s *otlpSink) byID() map[trace.SpanID]*tracepb.Span {
	m := map[trace.SpanID]*tracepb.Span{}
	for _, sp := range s.all() {
		m[trace.SpanID(sp.SpanId)] = sp
	}
	return m
}

// collector is an OTLP/gRPC receiver on a loopback address.
type collector struct {
	addr string
	sink *otlpSink
	srv  *grpc.Server
	done chan struct{}
}

// startCollector serves a new sink on addr (a new port when "") until
// stop or the end of the test.
func startCollector(t testing.TB, addr string) *collector {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{addr: ln.Addr().String(), sink: &otlpSink{}, srv: grpc.NewServer(), done: make(chan struct{})}
	coltracepb.RegisterTraceServiceServer(c.srv, c.sink)
	go func() { defer close(c.done); c.srv.Serve(ln) }()
	t.Cleanup(c.stop)
	return c
}

// stop closes the listener and every connection at once, as a crash
// would, and waits for the server to end.
func (c *collector) stop() {
	c.srv.Stop()
	<-c.done
}

// tracingYAML is a tracing section that sends to addr in batches of at
// most 50 ms.
func tracingYAML(addr string, sample float64, honourParent bool) string {
	return fmt.Sprintf("tracing:\n  sample: %v\n  honour_parent: %v\n  exporter: {endpoint: %q, insecure: true, batch_timeout: 50ms}\n",
		sample, honourParent, addr)
}

// startH2CEcho is an echo backend over h2c (prior knowledge).
func startH2CEcho(t testing.TB, name string) string {
	t.Helper()
	return h2test.ServeH2C(t, &http2.Server{}, echoHandler(name)).URL
}

// clientContext is a client's traceparent: a new trace and span, sampled.
type clientContext struct {
	trace trace.TraceID
	span  trace.SpanID
}

func newClientContext() clientContext {
	return clientContext{trace.NewTraceID(), trace.NewSpanID()}
}

func (c clientContext) traceparent(flags byte) string {
	return string(trace.AppendTraceparent(nil, c.trace, c.span, flags))
}

// backendParent is the one traceparent a backend got, parsed; the test
// fails unless there is exactly one and it is valid version 00.
func backendParent(t testing.TB, h http.Header) trace.Parent {
	t.Helper()
	vs := h.Values("Traceparent")
	if len(vs) != 1 {
		t.Fatalf("backend got %d traceparent fields %q, want exactly one", len(vs), vs)
	}
	p := trace.ParseTraceparent([]byte(vs[0]))
	if !p.Valid || len(vs[0]) != trace.TraceparentLen || vs[0][:3] != "00-" {
		t.Fatalf("backend got traceparent %q, not a valid version 00 one", vs[0])
	}
	return p
}

// attrs is a span's attributes as Go values (string or int64).
func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		default:
			m[kv.Key] = fmt.Sprint(v)
		}
	}
	return m
}

// waitSpans waits up to limit for the sink to hold at least n spans.
func waitSpans(t testing.TB, s *otlpSink, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for s.count() < n {
		if time.Now().After(deadline) {
			t.Fatalf("after %v the collector has %d spans, want %d", limit, s.count(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// parentOf is a span's parent span id; zero for a root span.
func parentOf(sp *tracepb.Span) trace.SpanID {
	var p trace.SpanID
	copy(p[:], sp.ParentSpanId)
	return p
}

// The backend gets exactly one traceparent: the client's trace id, and
// relay's span as the parent; the client's tracestate goes on as it
// came. The span the collector gets has that span id, the client's span
// as its parent, and the request's route, pool, backend, status, request
// id and protocol. So for each front door (HTTP/1.1, HTTP/2 over h2c) and
// each backend protocol (HTTP/1.1, h2c); field names are matched in any
// case (HTTP/1.1's TraceParent is the client's traceparent).
func TestTracingTraceparentReachesBackend(t *testing.T) {
	col := startCollector(t, "")
	h1 := startEcho(t, "h1")
	h2URL := startH2CEcho(t, "h2")
	r := startRelay(t, `
pools:
  h1pool: {backends: [`+h1.url+`]}
  h2pool: {protocol: h2c, backends: [`+h2URL+`]}
routes:
  - name: to-h1
    match: {path_prefix: /h1}
    pool: h1pool
  - name: to-h2
    match: {path_prefix: /h2}
    pool: h2pool
`+tracingYAML(col.addr, 1, true), Options{})

	const state = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	type sent struct {
		door, up, route, pool, backend, version, path string
		client                                        clientContext
		relay                                         trace.SpanID
		requestID                                     string
	}
	var all []sent
	for _, d := range sends {
		for _, up := range []struct{ path, route, pool, backend string }{
			{"/h1/x?q=1", "to-h1", "h1pool", h1.url},
			{"/h2/x?q=1", "to-h2", "h2pool", h2URL},
		} {
			cc := newClientContext()
			got := d.send(t, r.addr, rawReq{target: up.path, host: "app.example:8080", header: [][2]string{
				{"TraceParent", cc.traceparent(trace.FlagSampled)}, {"TraceState", state},
			}})
			s := got.seen()
			if got.status != 200 || s == nil {
				t.Fatalf("%s to %s: %v", d.proto, up.pool, &got)
			}
			p := backendParent(t, s.Headers)
			if p.Trace != cc.trace || p.Span == cc.span || p.Flags != trace.FlagSampled {
				t.Errorf("%s to %s: backend got trace %v parent %v flags %02x; want trace %v, a parent of relay's (not the client's %v), flags 01",
					d.proto, up.pool, p.Trace, p.Span, p.Flags, cc.trace, cc.span)
			}
			if ts := s.Headers.Values("Tracestate"); len(ts) != 1 || ts[0] != state {
				t.Errorf("%s to %s: backend got tracestate %q, want [%q]", d.proto, up.pool, ts, state)
			}
			version := map[string]string{"HTTP/1.1": "1.1", "HTTP/2": "2"}[d.proto]
			path, _, _ := strings.Cut(up.path, "?")
			all = append(all, sent{d.proto, up.pool, up.route, up.pool, up.backend, version, path, cc, p.Span, s.Headers.Get("X-Request-Id")})
		}
	}
	waitSpans(t, col.sink, len(all), ioTimeout)
	spans := col.sink.byID()
	if len(spans) != len(all) {
		t.Errorf("collector got %d spans, want %d", len(spans), len(all))
	}
	for _, w := range all {
		sp := spans[w.relay]
		if sp == nil {
			t.Errorf("%s to %s: no span with relay's span id %v", w.door, w.up, w.relay)
			continue
		}
		if trace.TraceID(sp.TraceId) != w.client.trace || parentOf(sp) != w.client.span || sp.TraceState != state ||
			sp.Kind != tracepb.Span_SPAN_KIND_SERVER || sp.Name != "GET "+w.route {
			t.Errorf("%s to %s: span trace %x parent %x tracestate %q kind %v name %q; want %v, %v, %q, server, %q",
				w.door, w.up, sp.TraceId, sp.ParentSpanId, sp.TraceState, sp.Kind, sp.Name, w.client.trace, w.client.span, state, "GET "+w.route)
		}
		if sp.Flags&uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK) == 0 {
			t.Errorf("%s to %s: span flags %#x do not say the parent is remote", w.door, w.up, sp.Flags)
		}
		a := attrs(sp.Attributes)
		want := map[string]any{
			"relay.route": w.route, "relay.pool": w.pool, "relay.backend": w.backend, "relay.retries": int64(0),
			"http.response.status_code": int64(200), "relay.request_id": w.requestID, "http.request.method": "GET",
			"url.path":       w.path,
			"server.address": "app.example", "server.port": int64(8080), "network.protocol.version": w.version,
			"url.scheme": "http", "client.address": "127.0.0.1",
		}
		if w.requestID == "" {
			t.Errorf("%s to %s: the backend got no X-Request-Id", w.door, w.up)
		}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("%s to %s: span's %s = %v (%T), want %v", w.door, w.up, k, a[k], a[k], v)
			}
		}
	}
}

// A request without a traceparent starts a trace: the backend gets a
// fresh valid traceparent whose flags say relay made the trace id
// (random) and whether it sampled the request, per the sample ratio; a
// tracestate without a traceparent is not passed on. At sample 1 the
// collector gets the root span (no parent) under the id the backend saw;
// at sample 0 nothing is exported at all.
func TestTracingStartsTraceWithoutTraceparent(t *testing.T) {
	col := startCollector(t, "")
	quiet := startCollector(t, "")
	rep, _ := echoes(t, "a")
	all := startRelay(t, rep.Replace("backends: [$a]\n")+tracingYAML(col.addr, 1, true), Options{})
	none := startRelay(t, rep.Replace("backends: [$a]\n")+tracingYAML(quiet.addr, 0, true), Options{})

	traces := map[trace.TraceID]bool{}
	var roots []trace.Parent
	for _, c := range []struct {
		r     *testRelay
		flags byte
	}{{all, trace.FlagRandom | trace.FlagSampled}, {none, trace.FlagRandom}} {
		for _, d := range sends {
			for i := range 3 {
				got := d.send(t, c.r.addr, rawReq{target: "/x", host: "app.example", header: [][2]string{{"tracestate", "orphan=1"}}})
				s := got.seen()
				if got.status != 200 || s == nil {
					t.Fatalf("%s: %v", d.proto, &got)
				}
				p := backendParent(t, s.Headers)
				if p.Flags != c.flags {
					t.Errorf("%s request %d: backend's traceparent has flags %02x, want %02x", d.proto, i, p.Flags, c.flags)
				}
				if traces[p.Trace] {
					t.Errorf("%s request %d: trace id %v used twice", d.proto, i, p.Trace)
				}
				traces[p.Trace] = true
				if ts := s.Headers.Values("Tracestate"); len(ts) != 0 {
					t.Errorf("%s request %d: backend got tracestate %q with relay's new trace", d.proto, i, ts)
				}
				if c.r == all {
					roots = append(roots, p)
				}
			}
		}
	}
	waitSpans(t, col.sink, len(roots), ioTimeout)
	spans := col.sink.byID()
	for _, p := range roots {
		sp := spans[p.Span]
		if sp == nil {
			t.Errorf("no span with the id %v the backend saw", p.Span)
			continue
		}
		if trace.TraceID(sp.TraceId) != p.Trace || len(sp.ParentSpanId) != 0 || sp.TraceState != "" {
			t.Errorf("span %v: trace %x parent %x tracestate %q; want trace %v, no parent, no tracestate", p.Span, sp.TraceId, sp.ParentSpanId, sp.TraceState, p.Trace)
		}
		if sp.Flags&uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK) != 0 {
			t.Errorf("span %v: a root span's flags %#x say its parent is remote", p.Span, sp.Flags)
		}
	}
	e := none.plane.Exporter()
	if n := e.Exported() + e.Dropped() + e.Failed(); n != 0 || quiet.sink.count() != 0 {
		t.Errorf("at sample 0 the exporter was handed %d spans and the collector got %d, want none", n, quiet.sink.count())
	}
}

// A malformed traceparent is ignored: the request is served, relay starts
// a new trace (a new trace id, no parent, flags of its own) and drops the
// tracestate that came with it. Two traceparent fields make the context
// invalid, even when each is well formed. A higher version's traceparent,
// longer than version 00's, is read as version 00.
func TestTracingIgnoresMalformedTraceparent(t *testing.T) {
	col := startCollector(t, "")
	rep, _ := echoes(t, "a")
	r := startRelay(t, rep.Replace("backends: [$a]\n")+tracingYAML(col.addr, 1, true), Options{})

	const tr, sp = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	good := "00-" + tr + "-" + sp + "-01"
	cases := []struct {
		name   string
		fields []string
		valid  bool
	}{
		{"upper-case hex", []string{"00-" + strings.ToUpper(tr) + "-" + sp + "-01"}, false},
		{"version ff", []string{"ff-" + tr + "-" + sp + "-01"}, false},
		{"zero trace id", []string{"00-" + strings.Repeat("0", 32) + "-" + sp + "-01"}, false},
		{"zero parent id", []string{"00-" + tr + "-" + strings.Repeat("0", 16) + "-01"}, false},
		{"too short", []string{"00-" + tr[:30] + "-" + sp + "-01"}, false},
		{"version 00 too long", []string{good + "-extra"}, false},
		{"bad separator", []string{"00_" + tr + "-" + sp + "-01"}, false},
		{"not hex", []string{"00-" + tr[:31] + "g-" + sp + "-01"}, false},
		{"flags not hex", []string{"00-" + tr + "-" + sp + "-zz"}, false},
		{"garbage", []string{"hello"}, false},
		{"empty", []string{""}, false},
		{"two fields", []string{good, "00-" + strings.Repeat("ab", 16) + "-" + sp + "-01"}, false},
		{"the same field twice", []string{good, good}, false},
		{"version 01, longer", []string{"01-" + tr + "-" + sp + "-01-more"}, true},
	}
	type made struct {
		name, door string
		p          trace.Parent
		valid      bool
	}
	var all []made
	for _, d := range sends {
		for _, c := range cases {
			h := [][2]string{{"tracestate", "congo=t61rcWkgMzE"}}
			for _, f := range c.fields {
				h = append(h, [2]string{"traceparent", f})
			}
			got := d.send(t, r.addr, rawReq{target: "/x", host: "app.example", header: h})
			s := got.seen()
			if got.status != 200 || s == nil {
				t.Fatalf("%s %s: %v", d.proto, c.name, &got)
			}
			p := backendParent(t, s.Headers)
			ts := s.Headers.Values("Tracestate")
			switch {
			case c.valid && (p.Trace.String() != tr || p.Flags != trace.FlagSampled || len(ts) != 1):
				t.Errorf("%s %s: backend got trace %v flags %02x tracestate %q; want the client's trace, 01 and its tracestate", d.proto, c.name, p.Trace, p.Flags, ts)
			case !c.valid && (p.Trace.String() == tr || p.Flags != trace.FlagRandom|trace.FlagSampled || len(ts) != 0):
				t.Errorf("%s %s: backend got trace %v flags %02x tracestate %q; want a new trace, 03 and no tracestate", d.proto, c.name, p.Trace, p.Flags, ts)
			}
			all = append(all, made{c.name, d.proto, p, c.valid})
		}
	}
	waitSpans(t, col.sink, len(all), ioTimeout)
	spans := col.sink.byID()
	for _, m := range all {
		sp := spans[m.p.Span]
		switch {
		case sp == nil:
			t.Errorf("%s %s: no span %v", m.door, m.name, m.p.Span)
		case trace.TraceID(sp.TraceId) != m.p.Trace:
			t.Errorf("%s %s: span's trace %x, the backend's %v", m.door, m.name, sp.TraceId, m.p.Trace)
		case !m.valid && len(sp.ParentSpanId) != 0:
			t.Errorf("%s %s: span has parent %x; relay started the trace", m.door, m.name, sp.ParentSpanId)
		case m.valid && hex.EncodeToString(sp.ParentSpanId) != "00f067aa0ba902b7":
			t.Errorf("%s %s: span has parent %x, want the client's", m.door, m.name, sp.ParentSpanId)
		}
	}
}

// loadClient is a keep-alive client over one of the front doors.
type loadClient struct {
	proto  string
	client *http.Client
	close  func()
}

// loadClients makes n clients, every other one over h2c, each with
// connections of its own that it keeps alive until the end of the test.
func loadClients(t testing.TB, n int) []loadClient {
	var cs []loadClient
	for i := range n {
		var c loadClient
		if i%2 == 1 {
			tr := h2cTransport()
			c = loadClient{"HTTP/2", &http.Client{Transport: tr, Timeout: ioTimeout}, tr.CloseIdleConnections}
		} else {
			tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
			c = loadClient{"HTTP/1.1", &http.Client{Transport: tr, Timeout: ioTimeout}, tr.CloseIdleConnections}
		}
		t.Cleanup(c.close)
		cs = append(cs, c)
	}
	return cs
}

// eachClient calls send on a goroutine of each client's, again and again
// until it returns false, and returns once every one has stopped.
func eachClient(clients []loadClient, send func(c loadClient) bool) {
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for send(c) {
			}
		}()
	}
	wg.Wait()
}

// getWith sends GET url with the traceparent tp and reads the answer
// whole.
func getWith(c *http.Client, url, tp string) (int, []byte, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Traceparent", tp)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// parentsBackend is a backend that answers each request with the
// traceparent fields it got, joined by '|', and remembers, by trace id,
// the parent id of each (several fields count as a failure).
type parentsBackend struct {
	url     string
	mu      sync.Mutex
	parents map[trace.TraceID]trace.SpanID
	bad     atomic.Int64
}

func startParentsBackend(t testing.TB) *parentsBackend {
	t.Helper()
	b := &parentsBackend{parents: map[trace.TraceID]trace.SpanID{}}
	b.url = serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vs := r.Header.Values("Traceparent")
		io.WriteString(w, strings.Join(vs, "|"))
		p := trace.ParseTraceparent([]byte(strings.Join(vs, "|")))
		if len(vs) != 1 || !p.Valid {
			b.bad.Add(1)
			return
		}
		b.mu.Lock()
		b.parents[p.Trace] = p.Span
		b.mu.Unlock()
	}))
	return b
}

// startLoadRelay serves a relay in front of a parentsBackend that sends
// its spans, sampled as sample and honourParent say, to a new collector.
func startLoadRelay(t *testing.T, sample float64, honourParent bool) (*collector, *parentsBackend, *testRelay) {
	t.Helper()
	col := startCollector(t, "")
	b := startParentsBackend(t)
	r := startRelay(t, "backends: ["+b.url+"]\n"+tracingYAML(col.addr, sample, honourParent), Options{})
	return col, b, r
}

// runLoad sends n requests from len(clients) clients at once, each with
// the traceparent of ctxs[i] and flags, and fails the test on any error
// or status but 200.
func runLoad(t *testing.T, addr string, clients []loadClient, ctxs []clientContext, flags byte) {
	t.Helper()
	var next atomic.Int64
	var failures atomic.Int64
	var firstErr sync.Once
	eachClient(clients, func(c loadClient) bool {
		i := int(next.Add(1) - 1)
		if i >= len(ctxs) {
			return false
		}
		st, _, err := getWith(c.client, "http://"+addr+"/load", ctxs[i].traceparent(flags))
		if err != nil || st != 200 {
			failures.Add(1)
			firstErr.Do(func() { t.Errorf("%s request %d: status %d, %v", c.proto, i, st, err) })
		}
		return true
	})
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed", n, len(ctxs))
	}
}

// 10,000 requests with a sampled traceparent, at sample 1 with the
// default honour_parent, from four keep-alive clients (two over HTTP/1.1,
// two over h2c) give exactly 10,000 server spans: one per request, each in
// the client's trace, with the client's span as its parent and the id the
// backend got as its parent id; the exporter dropped and lost none.
func TestTracingTenThousandSpans(t *testing.T) {
	const n = 10000
	col, b, r := startLoadRelay(t, 1, true)
	ctxs := make([]clientContext, n)
	byTrace := make(map[trace.TraceID]trace.SpanID, n)
	for i := range ctxs {
		ctxs[i] = newClientContext()
		byTrace[ctxs[i].trace] = ctxs[i].span
	}
	start := time.Now()
	runLoad(t, r.addr, loadClients(t, 4), ctxs, trace.FlagSampled)
	took := time.Since(start)
	waitSpans(t, col.sink, n, 30*time.Second)
	// Anything more would come within a few batch timeouts.
	time.Sleep(300 * time.Millisecond)
	spans := col.sink.all()
	e := r.plane.Exporter()
	t.Logf("%d requests in %v; collector got %d spans (exported %d, dropped %d, failed %d)",
		n, took.Round(time.Millisecond), len(spans), e.Exported(), e.Dropped(), e.Failed())
	if len(spans) != n || e.Exported() != n || e.Dropped() != 0 || e.Failed() != 0 {
		t.Fatalf("collector got %d spans, exporter exported %d, dropped %d, failed %d; want exactly %d and no loss",
			len(spans), e.Exported(), e.Dropped(), e.Failed(), n)
	}
	if bad := b.bad.Load(); bad != 0 {
		t.Errorf("%d requests reached the backend without exactly one valid traceparent", bad)
	}
	ids := make(map[trace.SpanID]bool, n)
	wrong := 0
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sp := range spans {
		id, tr := trace.SpanID(sp.SpanId), trace.TraceID(sp.TraceId)
		client, known := byTrace[tr]
		switch {
		case ids[id]:
			t.Fatalf("span id %v twice", id)
		case !known:
			t.Fatalf("span %v in trace %v no client sent", id, tr)
		case parentOf(sp) != client || b.parents[tr] != id || attrs(sp.Attributes)["http.response.status_code"] != int64(200):
			if wrong++; wrong <= 5 {
				t.Errorf("span %v of trace %v: parent %x, want the client's %v; the backend's parent id %v", id, tr, sp.ParentSpanId, client, b.parents[tr])
			}
		}
		ids[id] = true
		delete(byTrace, tr)
	}
	if wrong > 0 || len(byTrace) > 0 {
		t.Fatalf("%d spans wrong, %d traces without a span", wrong, len(byTrace))
	}
}

// At sample 0.01 with honour_parent false, relay samples by the trace id
// alone, whatever the client's sampled flag says: of 10,000 requests,
// every one sampled, 70 to 130 spans arrive, exactly those of the traces
// whose ids the ratio admits, and the backend's traceparent says
// sampled for those and not for the others. The trace ids come from a
// seeded generator, so the count is the same from run to run.
func TestTracingSampleRatio(t *testing.T) {
	const n = 10000
	col, _, r := startLoadRelay(t, 0.01, false)
	rng := rand.New(rand.NewPCG(20260101, 42))
	ctxs := make([]clientContext, n)
	admitted := map[trace.TraceID]bool{}
	ratio := 0.01
	bound := uint64(ratio * (1 << 63))
	for i := range ctxs {
		var c clientContext
		binary.BigEndian.PutUint64(c.trace[:8], rng.Uint64())
		binary.BigEndian.PutUint64(c.trace[8:], rng.Uint64())
		binary.BigEndian.PutUint64(c.span[:], rng.Uint64()|1)
		ctxs[i] = c
		if binary.BigEndian.Uint64(c.trace[8:])>>1 < bound {
			admitted[c.trace] = true
		}
	}
	runLoad(t, r.addr, loadClients(t, 4), ctxs, trace.FlagSampled)
	e := r.plane.Exporter()
	waitFor(t, "the exporter to send every span", func() bool { return e.Exported()+e.Dropped()+e.Failed() == uint64(len(admitted)) })
	waitSpans(t, col.sink, len(admitted), ioTimeout)
	time.Sleep(300 * time.Millisecond)
	spans := col.sink.all()
	t.Logf("sample 0.01: %d spans of %d requests (the ratio admits %d of the trace ids)", len(spans), n, len(admitted))
	if len(spans) < 70 || len(spans) > 130 || len(spans) != len(admitted) {
		t.Fatalf("%d spans of %d requests at sample 0.01, want 70-130 and exactly the %d admitted", len(spans), n, len(admitted))
	}
	for _, sp := range spans {
		if !admitted[trace.TraceID(sp.TraceId)] {
			t.Errorf("span of trace %x, which the ratio does not admit", sp.TraceId)
		}
	}
	// The backend's traceparent is sampled for an admitted trace and not
	// for the others, though the client's says sampled: the backend
	// answers with the field it got.
	for _, c := range ctxs[:50] {
		st, body, err := getWith(&http.Client{Timeout: ioTimeout}, "http://"+r.addr+"/flags", c.traceparent(trace.FlagSampled))
		if err != nil || st != 200 {
			t.Fatalf("status %d, %v", st, err)
		}
		p := trace.ParseTraceparent(body)
		want := byte(0)
		if admitted[c.trace] {
			want = trace.FlagSampled
		}
		if !p.Valid || p.Trace != c.trace || p.Flags != want {
			t.Errorf("trace %v (admitted %v): backend got %q, want flags %02x", c.trace, admitted[c.trace], body, want)
		}
	}
}

// The collector is stopped in the middle of a run and started again on
// its address: relay serves every request meanwhile (no failure, no wait
// on the exporter), and spans of requests sent after the restart reach
// the new collector: 1,000 of them, two batches at least, within 15 s.
func TestTracingSurvivesCollectorRestart(t *testing.T) {
	first, _, r := startLoadRelay(t, 1, true)

	var phase atomic.Int32 // 0 collector up, 1 down, 2 restarted
	var mu sync.Mutex
	phaseOf := map[trace.TraceID]int32{}
	var sent [3]atomic.Int64
	var failures atomic.Int64
	var slowest atomic.Int64
	clients := loadClients(t, 3)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		eachClient(clients, func(c loadClient) bool {
			select {
			case <-stop:
				return false
			default:
			}
			cc := newClientContext()
			ph := phase.Load()
			mu.Lock()
			phaseOf[cc.trace] = ph
			mu.Unlock()
			start := time.Now()
			st, _, err := getWith(c.client, "http://"+r.addr+"/x", cc.traceparent(trace.FlagSampled))
			if d := int64(time.Since(start)); d > slowest.Load() {
				slowest.Store(d)
			}
			sent[ph].Add(1)
			if err != nil || st != 200 {
				if failures.Add(1) == 1 {
					t.Errorf("%s: status %d, %v", c.proto, st, err)
				}
			}
			return true
		})
	}()
	var stopOnce sync.Once
	stopLoad := func() {
		stopOnce.Do(func() { close(stop) })
		<-stopped
	}
	defer stopLoad()

	waitSpans(t, first.sink, 200, 10*time.Second)
	first.stop()
	phase.Store(1)
	time.Sleep(time.Second)
	second := startCollector(t, first.addr)
	restarted := time.Now()
	phase.Store(2)
	after := func() int {
		n := 0
		mu.Lock()
		defer mu.Unlock()
		for _, sp := range second.sink.all() {
			if phaseOf[trace.TraceID(sp.TraceId)] == 2 {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(15 * time.Second)
	for after() < 1000 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	resumed := time.Since(restarted)
	stopLoad()
	e := r.plane.Exporter()
	t.Logf("requests sent: %d before the stop, %d while the collector was down, %d after the restart; failures %d, slowest %v",
		sent[0].Load(), sent[1].Load(), sent[2].Load(), failures.Load(), time.Duration(slowest.Load()).Round(time.Millisecond))
	t.Logf("first collector got %d spans, the second %d (%d of requests sent after the restart, 1000 reached %v after it); exporter exported %d, dropped %d, failed %d",
		first.sink.count(), second.sink.count(), after(), resumed.Round(time.Millisecond), e.Exported(), e.Dropped(), e.Failed())
	if failures.Load() != 0 {
		t.Fatalf("%d requests failed", failures.Load())
	}
	if sent[1].Load() == 0 || sent[2].Load() == 0 {
		t.Fatalf("no requests while the collector was down (%d) or after it came back (%d)", sent[1].Load(), sent[2].Load())
	}
	if n := after(); n < 1000 {
		t.Fatalf("15 s after the restart the new collector has %d spans of requests sent since, want 1000", n)
	}
}

// Spans carry what relay did with the request: relay.retries counts the
// attempts retried when a backend refuses connections, relay.backend is
// the one that answered, relay's 503 when none can be reached marks the
// span as an error, and a gRPC
// call's span has rpc.system and its grpc-status.
func TestTracingSpanAttributes(t *testing.T) {
	col := startCollector(t, "")
	live := startEcho(t, "live")
	dead, deader := "http://"+testaddr.Refused(t), "http://"+testaddr.Refused(t)
	g := grpctest.Start(t)
	r := startRelay(t, `
pools:
  flaky: {retries: 2, backends: [`+dead+`, `+live.url+`]}
  dead: {retries: 1, backends: [`+deader+`]}
  grpc: {protocol: h2c, backends: [`+g.URL+`]}
routes:
  - name: flaky-route
    match: {path_prefix: /flaky}
    pool: flaky
  - name: dead-route
    match: {path_prefix: /dead}
    pool: dead
  - name: grpc-route
    match: {path_prefix: /grpc.testing.TestService/}
    pool: grpc
`+tracingYAML(col.addr, 1, true), Options{})

	ids := map[trace.SpanID]string{} // relay's span id: the request id the client got
	for i := range 10 {
		got := sendH1(t, r.addr, rawReq{target: "/flaky/" + strconv.Itoa(i), host: "app.example"})
		s := got.seen()
		if got.status != 200 || s == nil {
			t.Fatalf("flaky request %d: %v", i, &got)
		}
		ids[backendParent(t, s.Headers).Span] = got.header.Get("X-Request-Id")
	}
	got := sendH1(t, r.addr, rawReq{target: "/dead/x", host: "app.example"})
	if got.status != 503 {
		t.Fatalf("request to a pool that refuses: %v", &got)
	}
	deadRID := got.header.Get("X-Request-Id")

	_, client := grpctest.Dial(t, r.addr, nil)
	cc := newClientContext()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "traceparent", cc.traceparent(trace.FlagSampled)), ioTimeout)
	defer cancel()
	if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.NotFound), Message: "no"}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("UnaryCall asking for NOT_FOUND: %v", err)
	}

	waitSpans(t, col.sink, 13, ioTimeout)
	retried := 0
	var grpcCodes []int64
	for _, sp := range col.sink.all() {
		a := attrs(sp.Attributes)
		switch a["relay.route"] {
		case "flaky-route":
			rid, ok := ids[trace.SpanID(sp.SpanId)]
			if !ok || a["relay.pool"] != "flaky" || a["relay.backend"] != live.url || a["http.response.status_code"] != int64(200) ||
				a["relay.request_id"] != rid || rid == "" || sp.Status != nil {
				t.Errorf("flaky span %x: %v, status %v; want pool flaky, backend %s, 200, request id %q", sp.SpanId, a, sp.Status, live.url, rid)
			}
			n, _ := a["relay.retries"].(int64)
			if n > 0 {
				retried++
			}
			// Each retried attempt went to the refusing backend, and is
			// an event on the span saying so.
			if int64(len(sp.Events)) != n {
				t.Errorf("flaky span %x: %d events for %d retries", sp.SpanId, len(sp.Events), n)
			}
			for _, ev := range sp.Events {
				if ea := attrs(ev.Attributes); ev.Name != "relay.attempt.failed" || ea["relay.backend"] != dead ||
					!strings.HasPrefix(fmt.Sprint(ea["error.type"]), "unreachable: ") || ev.TimeUnixNano < sp.StartTimeUnixNano || ev.TimeUnixNano > sp.EndTimeUnixNano {
					t.Errorf("flaky span %x: event %s %v at %d, want relay.attempt.failed from %s, unreachable, within the span", sp.SpanId, ev.Name, ea, ev.TimeUnixNano, dead)
				}
			}
		case "dead-route":
			if a["relay.pool"] != "dead" || a["http.response.status_code"] != int64(503) || a["error.type"] != "503" ||
				a["relay.request_id"] != deadRID || sp.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("span of the refused request: %v, status %v; want pool dead, 503, error.type 503, request id %q, an error", a, sp.Status, deadRID)
			}
			if len(sp.Events) == 0 {
				t.Error("span of the refused request has no event of its failed attempts")
			}
			for _, ev := range sp.Events {
				if attrs(ev.Attributes)["relay.backend"] != deader {
					t.Errorf("span of the refused request: event %v, want one from %s", attrs(ev.Attributes), deader)
				}
			}
		case "grpc-route":
			if a["rpc.system"] != "grpc" || a["relay.pool"] != "grpc" || a["relay.backend"] != g.URL ||
				trace.TraceID(sp.TraceId) != cc.trace || parentOf(sp) != cc.span || a["network.protocol.version"] != "2" {
				t.Errorf("gRPC span: %v, trace %x parent %x; want rpc.system grpc, pool grpc, backend %s, the client's trace and span", a, sp.TraceId, sp.ParentSpanId, g.URL)
			}
			code, _ := a["rpc.grpc.status_code"].(int64)
			grpcCodes = append(grpcCodes, code)
		default:
			t.Errorf("span of no route the test sent to: %v", a)
		}
	}
	t.Logf("%d of 10 requests to the pool with a refusing backend were retried", retried)
	if retried == 0 {
		t.Error("no span says relay.retries > 0, though a backend refuses connections")
	}
	if len(grpcCodes) != 2 || grpcCodes[0]+grpcCodes[1] != int64(codes.NotFound) || grpcCodes[0]*grpcCodes[1] != 0 {
		t.Errorf("gRPC spans' rpc.grpc.status_code %v, want 0 and 5", grpcCodes)
	}
}

// The access log line carries the request's trace id: the client's, or
// the one relay started, as the backend got it; over both front doors.
func TestTracingAccessLogCarriesTraceID(t *testing.T) {
	col := startCollector(t, "")
	var buf bytes.Buffer
	log := logging.NewAccessLog(&buf)
	rep, _ := echoes(t, "a")
	r := startRelay(t, rep.Replace("backends: [$a]\n")+tracingYAML(col.addr, 1, true), Options{AccessLog: log})
	want := map[string]string{} // path: trace id
	for _, d := range sends {
		cc := newClientContext()
		path := "/with/" + strings.ReplaceAll(d.proto, "/", "")
		if got := d.send(t, r.addr, rawReq{target: path, host: "app.example", header: [][2]string{{"traceparent", cc.traceparent(1)}}}); got.status != 200 {
			t.Fatalf("%s: %v", d.proto, &got)
		}
		want[path] = cc.trace.String()
		path = "/without/" + strings.ReplaceAll(d.proto, "/", "")
		got := d.send(t, r.addr, rawReq{target: path, host: "app.example"})
		if got.status != 200 || got.seen() == nil {
			t.Fatalf("%s: %v", d.proto, &got)
		}
		want[path] = backendParent(t, got.seen().Headers).Trace.String()
	}
	waitFor(t, "the relay's connections to end", func() bool { return r.proxy.Connections() == 0 })
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d access log lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for _, l := range lines {
		var al struct {
			Path    string `json:"path"`
			TraceID string `json:"trace_id"`
		}
		if err := json.Unmarshal([]byte(l), &al); err != nil {
			t.Fatalf("access log line %q: %v", l, err)
		}
		if al.TraceID != want[al.Path] || len(al.TraceID) != 32 {
			t.Errorf("%s logged trace_id %q, want %q", al.Path, al.TraceID, want[al.Path])
		}
	}
}

// relay's traceparent, new on every request (relay's span id), goes to
// an HTTP/2 backend as a literal never indexed, as X-Request-Id does: in
// the backend's HPACK table it would only push out the fields that
// repeat.
func TestTracingTraceparentNeverIndexed(t *testing.T) {
	col := startCollector(t, "")
	var mu sync.Mutex
	var got []http2.MetaHeadersFrame
	b := h2test.StartHostile(t, ioTimeout, func(c *h2test.Conn, f *http2.MetaHeadersFrame) {
		mu.Lock()
		got = append(got, *f)
		mu.Unlock()
		c.Head(f.StreamID, true, ":status", "200")
	}, nil)
	r := startRelay(t, "protocol: h2c\nbackends: ["+b.URL+"]\n"+tracingYAML(col.addr, 1, true), Options{})
	for _, d := range sends {
		for range 3 {
			if rep := d.send(t, r.addr, rawReq{target: "/x", host: "app.example", header: [][2]string{
				{"traceparent", newClientContext().traceparent(1)}, {"tracestate", "congo=t61rcWkgMzE"},
			}}); rep.status != 200 {
				t.Fatalf("%s: %v", d.proto, &rep)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 6 {
		t.Fatalf("backend got %d heads, want 6", len(got))
	}
	for i, f := range got {
		n := 0
		for _, hf := range f.Fields {
			switch hf.Name {
			case "traceparent":
				n++
				if !hf.Sensitive {
					t.Errorf("request %d: traceparent %q was sent indexable", i, hf.Value)
				}
			case "x-request-id":
				if !hf.Sensitive {
					t.Errorf("request %d: x-request-id was sent indexable", i)
				}
			}
		}
		if n != 1 {
			t.Errorf("request %d: %d traceparent fields, want 1", i, n)
		}
	}
}

// The client's tracestate fields reach the backend as one, checked by
// W3C Trace Context: members with OWS and empty ones tidied, a key given
// twice kept at its first entry, more than 512 bytes cut by whole
// entries (those over 128 characters first), and nothing at all when a
// member is malformed or there are more than 32. The span carries what
// the backend got.
func TestTracingTraceState(t *testing.T) {
	col := startCollector(t, "")
	rep, _ := echoes(t, "a")
	r := startRelay(t, rep.Replace("backends: [$a]\n")+tracingYAML(col.addr, 1, true), Options{})
	long := func(k string, n int) string { return k + "=" + strings.Repeat("v", n) }
	many := func(n int) string {
		m := make([]string, n)
		for i := range m {
			m[i] = fmt.Sprintf("k%d=%d", i, i)
		}
		return strings.Join(m, ",")
	}
	// 30 entries of 258 bytes: 7.8 KB, of which one fits in 512 bytes.
	var huge []string
	for i := range 30 {
		huge = append(huge, long(fmt.Sprintf("h%02d", i), 254))
	}
	cases := []struct {
		name   string
		fields []string
		want   string
	}{
		{"fields joined", []string{"rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE"}, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
		{"OWS and empty members", []string{"foo=1 \t, ,\tbar=2 ,,baz=3"}, "foo=1,bar=2,baz=3"},
		{"a key twice", []string{"foo=1,bar=2", "foo=3"}, "foo=1,bar=2"},
		{"32 members", []string{many(32)}, many(32)},
		{"33 members", []string{many(33)}, ""},
		{"an upper-case key", []string{"foo=1", "Bar=2"}, ""},
		{"a value with =", []string{"foo=a=b"}, ""},
		{"an empty value", []string{"foo=,bar=2"}, ""},
		{"over 512 bytes", []string{long("a", 200), long("b", 100), long("c", 200), long("d", 100)}, long("a", 200) + "," + long("b", 100) + "," + long("d", 100)},
		{"a huge field", []string{strings.Join(huge, ",")}, huge[0]},
	}
	type sentCase struct {
		name, door, want string
		span             trace.SpanID
	}
	var all []sentCase
	for _, d := range sends {
		for _, c := range cases {
			h := [][2]string{{"traceparent", newClientContext().traceparent(trace.FlagSampled)}}
			for _, f := range c.fields {
				h = append(h, [2]string{"tracestate", f})
			}
			got := d.send(t, r.addr, rawReq{target: "/x", host: "app.example", header: h})
			s := got.seen()
			if got.status != 200 || s == nil {
				t.Fatalf("%s %s: %v", d.proto, c.name, &got)
			}
			ts := s.Headers.Values("Tracestate")
			if c.want == "" && len(ts) != 0 || c.want != "" && (len(ts) != 1 || ts[0] != c.want) {
				t.Errorf("%s %s: backend got tracestate %q, want %q", d.proto, c.name, ts, c.want)
			}
			all = append(all, sentCase{c.name, d.proto, c.want, backendParent(t, s.Headers).Span})
		}
	}
	waitSpans(t, col.sink, len(all), ioTimeout)
	spans := col.sink.byID()
	for _, c := range all {
		if sp := spans[c.span]; sp == nil || sp.TraceState != c.want {
			t.Errorf("%s %s: span %v; want its tracestate %q", c.door, c.name, sp, c.want)
		}
	}
}

// A collector that takes connections and never answers holds no request
// up: every one is served while the exporter's queue fills and its spans
// are dropped and counted, none exported.
func TestTracingStalledCollector(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	stalled := make(chan struct{}, 1) // the first connection, kept until read
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case stalled <- struct{}{}:
			default:
			}
			go func() { io.Copy(io.Discard, c) }() // reads, never writes
		}
	}()
	b := startParentsBackend(t)
	r := startRelay(t, "backends: ["+b.url+"]\n"+fmt.Sprintf(
		"tracing:\n  sample: 1\n  exporter: {endpoint: %q, insecure: true, batch_timeout: 10ms, queue_size: 32, batch_size: 8, export_timeout: 1m}\n",
		ln.Addr().String()), Options{})
	// Before relay closes: the collector goes away, so that the exporter's
	// Close does not wait out its time for the spans still queued.
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	const n = 400
	start := time.Now()
	var slowest time.Duration
	sent := 0
	for _, c := range loadClients(t, 2) {
		for range n / 2 {
			if sent == 20 {
				<-stalled // the exporter is in its stalled send from here on
			}
			at := time.Now()
			if st, _, err := getWith(c.client, "http://"+r.addr+"/x", newClientContext().traceparent(trace.FlagSampled)); err != nil || st != 200 {
				t.Fatalf("%s request %d with the collector stalled: %d, %v", c.proto, sent, st, err)
			}
			slowest = max(slowest, time.Since(at))
			sent++
		}
		c.close()
	}
	e := r.plane.Exporter()
	// At most the queue (32) is held; the rest was dropped, or failed
	// once gRPC gave up connecting. A request's span is handed over after
	// its answer, so the last ones may still be on their way.
	waitFor(t, "the spans past the queue dropped", func() bool { return e.Dropped()+e.Failed() >= n-32 })
	t.Logf("%d requests in %v, slowest %v; exported %d, dropped %d, failed %d", n, time.Since(start), slowest, e.Exported(), e.Dropped(), e.Failed())
	if e.Exported() != 0 || e.Dropped()+e.Failed() < n-32 {
		t.Fatalf("exported %d, dropped %d, failed %d of %d with a queue of 32", e.Exported(), e.Dropped(), e.Failed(), n)
	}
}
