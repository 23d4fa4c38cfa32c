package trace

import (
	"maps"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// attrsOf is a span's or event's attributes as a map of plain values.
func attrsOf(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		default:
			m[kv.Key] = v
		}
	}
	return m
}

// encodeOne is s as the exporter would send it, after a round trip
// through the wire format.
func encodeOne(t *testing.T, s *Span) *tracepb.Span {
	t.Helper()
	var r record
	r.fill(s)
	enc := newEncoder("relay", nil)
	b, err := proto.Marshal(enc.encode([]*record{&r}))
	if err != nil {
		t.Fatal(err)
	}
	var got tracepb.TracesData
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	return got.ResourceSpans[0].ScopeSpans[0].Spans[0]
}

func fullSpan() *Span {
	start := time.Unix(1700000000, 123456789)
	return &Span{
		Trace: TraceID{1, 2, 3}, ID: SpanID{4, 5}, Parent: SpanID{6}, Flags: FlagSampled | FlagRandom,
		TraceState: []byte("vendor=x"),
		Start:      start, End: start.Add(1500 * time.Microsecond),
		Method: "GET", Target: "/api/users?token=secret", Host: "shop.example:8443", Scheme: "https", Proto: "HTTP/2",
		Status: 502, Route: "api", Pool: "users", Backend: "10.0.0.2:8080", Retries: 1,
		GRPCStatus: "14", RequestID: "abc123", ClientAddr: "192.0.2.1:51234",
		Events: []Event{{Time: start.Add(time.Millisecond), Backend: "10.0.0.1:8080", Reason: "connect refused"}},
	}
}

func TestEncodeSpan(t *testing.T) {
	s := fullSpan()
	got := encodeOne(t, s)
	if string(got.TraceId) != string(s.Trace[:]) || string(got.SpanId) != string(s.ID[:]) || string(got.ParentSpanId) != string(s.Parent[:]) {
		t.Fatalf("ids %x %x %x", got.TraceId, got.SpanId, got.ParentSpanId)
	}
	if got.Name != "GET api" || got.Kind != tracepb.Span_SPAN_KIND_SERVER || got.TraceState != "vendor=x" {
		t.Fatalf("name %q kind %v tracestate %q", got.Name, got.Kind, got.TraceState)
	}
	if got.Flags != 0x303 {
		t.Fatalf("flags %#x, want 0x303 (sampled, random, remote parent known and remote)", got.Flags)
	}
	if got.StartTimeUnixNano != uint64(s.Start.UnixNano()) || got.EndTimeUnixNano != uint64(s.End.UnixNano()) {
		t.Fatalf("times %d %d", got.StartTimeUnixNano, got.EndTimeUnixNano)
	}
	want := map[string]any{
		"http.request.method":       "GET",
		"url.path":                  "/api/users",
		"url.scheme":                "https",
		"server.address":            "shop.example",
		"server.port":               int64(8443),
		"network.protocol.version":  "2",
		"client.address":            "192.0.2.1",
		"client.port":               int64(51234),
		"http.response.status_code": int64(502),
		"error.type":                "502",
		"rpc.system":                "grpc",
		"rpc.grpc.status_code":      int64(14),
		"relay.route":               "api",
		"relay.pool":                "users",
		"relay.backend":             "10.0.0.2:8080",
		"relay.retries":             int64(1),
		"relay.request_id":          "abc123",
	}
	if a := attrsOf(got.Attributes); !maps.Equal(a, want) {
		t.Fatalf("attributes\n got %v\nwant %v", a, want)
	}
	if got.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
		t.Fatalf("status %v, want error", got.Status)
	}
	if len(got.Events) != 1 || got.Events[0].Name != "relay.attempt.failed" ||
		got.Events[0].TimeUnixNano != uint64(s.Events[0].Time.UnixNano()) ||
		!maps.Equal(attrsOf(got.Events[0].Attributes), map[string]any{"relay.backend": "10.0.0.1:8080", "error.type": "connect refused"}) {
		t.Fatalf("events %v", got.Events)
	}
}

func TestEncodeSpanCases(t *testing.T) {
	long := strings.Repeat("é", MaxValueLen) // 2 bytes a rune: cut mid-rune
	tests := []struct {
		name  string
		edit  func(s *Span)
		check func(t *testing.T, sp *tracepb.Span, a map[string]any)
	}{
		{name: "name given", edit: func(s *Span) { s.Name = "custom" }, check: func(t *testing.T, sp *tracepb.Span, _ map[string]any) {
			if sp.Name != "custom" {
				t.Fatalf("name %q", sp.Name)
			}
		}},
		{name: "no route: method alone", edit: func(s *Span) { s.Route = "" }, check: func(t *testing.T, sp *tracepb.Span, a map[string]any) {
			if sp.Name != "GET" || a["relay.route"] != nil {
				t.Fatalf("name %q, route %v", sp.Name, a["relay.route"])
			}
		}},
		{name: "unknown method", edit: func(s *Span) { s.Method = "BREW" }, check: func(t *testing.T, sp *tracepb.Span, a map[string]any) {
			if sp.Name != "HTTP api" || a["http.request.method"] != "_OTHER" || a["http.request.method_original"] != "BREW" {
				t.Fatalf("name %q, attributes %v", sp.Name, a)
			}
		}},
		{name: "no parent: local root", edit: func(s *Span) { s.Parent = SpanID{} }, check: func(t *testing.T, sp *tracepb.Span, _ map[string]any) {
			if len(sp.ParentSpanId) != 0 || sp.Flags != 0x103 {
				t.Fatalf("parent %x flags %#x", sp.ParentSpanId, sp.Flags)
			}
		}},
		{name: "unsampled flags exported as sampled", edit: func(s *Span) { s.Flags = 0 }, check: func(t *testing.T, sp *tracepb.Span, _ map[string]any) {
			if sp.Flags&0xff != 1 {
				t.Fatalf("flags %#x", sp.Flags)
			}
		}},
		{name: "4xx is not an error", edit: func(s *Span) { s.Status, s.GRPCStatus = 404, "" }, check: func(t *testing.T, sp *tracepb.Span, a map[string]any) {
			if sp.Status != nil || a["error.type"] != nil || a["rpc.system"] != nil {
				t.Fatalf("status %v, attributes %v", sp.Status, a)
			}
		}},
		{name: "gRPC server fault on 200", edit: func(s *Span) { s.Status, s.GRPCStatus = 200, "13" }, check: func(t *testing.T, sp *tracepb.Span, a map[string]any) {
			if sp.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || a["rpc.grpc.status_code"] != int64(13) {
				t.Fatalf("status %v, attributes %v", sp.Status, a)
			}
		}},
		{name: "gRPC client fault", edit: func(s *Span) { s.Status, s.GRPCStatus = 200, "5" }, check: func(t *testing.T, sp *tracepb.Span, _ map[string]any) {
			if sp.Status != nil {
				t.Fatalf("status %v", sp.Status)
			}
		}},
		{name: "IPv6 host and client", edit: func(s *Span) { s.Host, s.ClientAddr = "[2001:db8::1]:8443", "2001:db8::2" }, check: func(t *testing.T, _ *tracepb.Span, a map[string]any) {
			if a["server.address"] != "2001:db8::1" || a["server.port"] != int64(8443) || a["client.address"] != "2001:db8::2" || a["client.port"] != nil {
				t.Fatalf("attributes %v", a)
			}
		}},
		{name: "host without port", edit: func(s *Span) { s.Host = "shop.example" }, check: func(t *testing.T, _ *tracepb.Span, a map[string]any) {
			if a["server.address"] != "shop.example" || a["server.port"] != nil {
				t.Fatalf("attributes %v", a)
			}
		}},
		{name: "not UTF-8", edit: func(s *Span) { s.Target, s.Host = "/caf\xe9", "h\xff" }, check: func(t *testing.T, _ *tracepb.Span, a map[string]any) {
			if a["url.path"] != "/caf?" || a["server.address"] != "h?" {
				t.Fatalf("attributes %v", a)
			}
		}},
		{name: "long value cut on a rune", edit: func(s *Span) { s.Target = "/" + long }, check: func(t *testing.T, _ *tracepb.Span, a map[string]any) {
			p := a["url.path"].(string)
			if len(p) > MaxValueLen || len(p) < MaxValueLen-1 || !utf8.ValidString(p) {
				t.Fatalf("path of %d bytes, valid %v", len(p), utf8.ValidString(p))
			}
		}},
		{name: "long tracestate left out", edit: func(s *Span) { s.TraceState = []byte(strings.Repeat("a", 513)) }, check: func(t *testing.T, sp *tracepb.Span, _ map[string]any) {
			if sp.TraceState != "" {
				t.Fatalf("tracestate kept")
			}
		}},
		{name: "events past the limit counted", edit: func(s *Span) {
			s.Events = make([]Event, MaxEvents+3)
			for i := range s.Events {
				s.Events[i] = Event{Time: s.Start, Backend: "b", Reason: "r"}
			}
		}, check: func(t *testing.T, sp *tracepb.Span, _ map[string]any) {
			if len(sp.Events) != MaxEvents || sp.DroppedEventsCount != 3 {
				t.Fatalf("%d events, %d dropped", len(sp.Events), sp.DroppedEventsCount)
			}
		}},
		{name: "zero times and status", edit: func(s *Span) { s.Start, s.End, s.Status, s.GRPCStatus = time.Time{}, time.Time{}, 0, "" }, check: func(t *testing.T, sp *tracepb.Span, a map[string]any) {
			if sp.StartTimeUnixNano != 0 || sp.EndTimeUnixNano != 0 || a["http.response.status_code"] != nil {
				t.Fatalf("times %d %d, attributes %v", sp.StartTimeUnixNano, sp.EndTimeUnixNano, a)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fullSpan()
			tt.edit(s)
			sp := encodeOne(t, s)
			tt.check(t, sp, attrsOf(sp.Attributes))
		})
	}
}

// TestEncoderReuse: a batch after a larger one carries only its own spans,
// each with its own attributes, however the messages were used before.
func TestEncoderReuse(t *testing.T) {
	enc := newEncoder("relay", map[string]string{"b": "2", "a": "1"})
	mk := func(n int, status int) []*record {
		rs := make([]*record, n)
		for i := range rs {
			s := fullSpan()
			s.ID = SpanID{byte(i + 1)}
			s.Status, s.GRPCStatus, s.Events = status, "", nil
			rs[i] = &record{}
			rs[i].fill(s)
		}
		return rs
	}
	if _, err := proto.Marshal(enc.encode(mk(5, 502))); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(enc.encode(mk(2, 200)))
	if err != nil {
		t.Fatal(err)
	}
	var got tracepb.TracesData
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	res := attrsOf(got.ResourceSpans[0].Resource.Attributes)
	if !maps.Equal(res, map[string]any{"service.name": "relay", "a": "1", "b": "2"}) {
		t.Fatalf("resource %v", res)
	}
	spans := got.ResourceSpans[0].ScopeSpans[0].Spans
	if len(spans) != 2 || got.ResourceSpans[0].ScopeSpans[0].Scope.GetName() != "relay" {
		t.Fatalf("%d spans", len(spans))
	}
	for i, sp := range spans {
		a := attrsOf(sp.Attributes)
		if sp.SpanId[0] != byte(i+1) || sp.Status != nil || a["error.type"] != nil || len(sp.Events) != 0 || a["http.response.status_code"] != int64(200) {
			t.Fatalf("span %d: %v", i, sp)
		}
	}
}

// TestFillAllocs: copying a span into a record that has held one allocates
// nothing.
func TestFillAllocs(t *testing.T) {
	s := fullSpan()
	var r record
	r.fill(s)
	if n := testing.AllocsPerRun(1000, func() { r.fill(s) }); n != 0 {
		t.Fatalf("%v allocations per fill, want 0", n)
	}
}

// BenchmarkEncodeBatch encodes and marshals a full default batch, as a
// send does before the transport.
func BenchmarkEncodeBatch(b *testing.B) {
	rs := make([]*record, DefaultBatchSize)
	for i := range rs {
		rs[i] = &record{}
		rs[i].fill(fullSpan())
	}
	enc := newEncoder("relay", nil)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		buf, err = proto.MarshalOptions{}.MarshalAppend(buf[:0], enc.encode(rs))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf))/DefaultBatchSize, "bytes/span")
}

// network.protocol.version is OpenTelemetry's "1.1" or "2" whichever way
// the core names the client's protocol: relay's HTTP/2 door calls it
// "HTTP/2.0", as the access log does.
func TestProtoVersion(t *testing.T) {
	for in, want := range map[string]string{
		"HTTP/1.0": "1.0", "HTTP/1.1": "1.1", "HTTP/2": "2", "HTTP/2.0": "2", "HTTP/3.0": "3", "": "", "SPDY/3": "SPDY/3",
	} {
		if got := protoVersion(in); got != want {
			t.Errorf("protoVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// A queued span holds at most MaxValueLen of each string and MaxEvents
// events, however large the client made its path, host, method or
// request id: the queue's memory is bounded by its length. A record
// that held a large span lets its buffer go when it is reused.
func TestRecordBounded(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	s := &Span{Trace: TraceID{1}, ID: SpanID{1}, Method: huge, Target: "/" + huge, Host: huge + ":1", Scheme: huge,
		Proto: huge, Route: huge, Pool: huge, Backend: huge, RequestID: huge, ClientAddr: huge,
		Name: huge, TraceState: []byte(huge), GRPCStatus: huge}
	for range 1000 {
		s.Events = append(s.Events, Event{Backend: huge, Reason: huge})
	}
	var r record
	r.fill(s)
	bound := (nStr + 2*MaxEvents) * MaxValueLen
	if len(r.buf) > bound {
		t.Fatalf("a record holds %d bytes of strings, more than %d", len(r.buf), bound)
	}
	if r.nEvents != MaxEvents || r.dropped != 1000-MaxEvents {
		t.Fatalf("events kept %d, dropped %d", r.nEvents, r.dropped)
	}
	r.fill(&Span{Trace: TraceID{1}, ID: SpanID{2}, Method: "GET", Target: "/"})
	if cap(r.buf) > recordBufKeep {
		t.Fatalf("after a small span the record keeps %d bytes", cap(r.buf))
	}
}
