package trace

import (
	"sort"
	"strconv"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// scopeName is the instrumentation scope of relay's spans.
const scopeName = "relay"

// encoder turns a batch of records into one OTLP export request. It keeps
// every message it made, batch after batch, and only points their fields
// at the records' ids and strings, so that a batch costs no allocation per
// span once the encoder has seen a batch as large. Strings are views of the
// records' buffers, which stay untouched until the batch has been sent.
type encoder struct {
	req   coltracepb.ExportTraceServiceRequest
	rs    tracepb.ResourceSpans
	ss    tracepb.ScopeSpans
	scope commonpb.InstrumentationScope
	rsp   [1]*tracepb.ResourceSpans
	ssp   [1]*tracepb.ScopeSpans

	spans []*spanMsg
	ptrs  []*tracepb.Span
}

// spanMsg is one span's messages, reused.
type spanMsg struct {
	span     tracepb.Span
	status   tracepb.Status
	attrs    [maxSpanAttrs]attrMsg
	attrPtrs [maxSpanAttrs]*commonpb.KeyValue
	events   *[MaxEvents]eventMsg // made for the first span with events
	evPtrs   [MaxEvents]*tracepb.Span_Event
}

// maxSpanAttrs is the most attributes span.go's fields become.
const maxSpanAttrs = 20

type eventMsg struct {
	ev       tracepb.Span_Event
	attrs    [2]attrMsg
	attrPtrs [2]*commonpb.KeyValue
}

// attrMsg is one attribute's messages: a string or an int value.
type attrMsg struct {
	kv commonpb.KeyValue
	v  commonpb.AnyValue
	s  commonpb.AnyValue_StringValue
	i  commonpb.AnyValue_IntValue
}

// newEncoder makes an encoder whose requests carry the resource of
// service name and attrs (sorted by key, so that requests are the same
// bytes from run to run).
func newEncoder(service string, attrs map[string]string) *encoder {
	e := &encoder{}
	res := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{stringKV("service.name", service)}}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		res.Attributes = append(res.Attributes, stringKV(k, attrs[k]))
	}
	e.scope.Name = scopeName
	e.rs.Resource = res
	e.ss.Scope = &e.scope
	e.ssp[0] = &e.ss
	e.rs.ScopeSpans = e.ssp[:]
	e.rsp[0] = &e.rs
	e.req.ResourceSpans = e.rsp[:]
	return e
}

func stringKV(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

// encode fills the request with rs and returns it; it is valid until the
// next call.
func (e *encoder) encode(rs []*record) *coltracepb.ExportTraceServiceRequest {
	for len(e.spans) < len(rs) {
		e.spans = append(e.spans, &spanMsg{})
		e.ptrs = append(e.ptrs, nil)
	}
	for i, r := range rs {
		m := e.spans[i]
		m.fill(r)
		e.ptrs[i] = &m.span
	}
	// Clear the pointers past this batch, so a smaller batch does not keep
	// a larger one's records reachable through them.
	clear(e.ptrs[len(rs):])
	e.ss.Spans = e.ptrs[:len(rs)]
	return &e.req
}

// release drops the request's views of records that are being reused.
func (e *encoder) release() {
	clear(e.ptrs)
	e.ss.Spans = nil
}

// kinds maps Kind to OTLP's.
var kinds = [...]tracepb.Span_SpanKind{
	KindServer:   tracepb.Span_SPAN_KIND_SERVER,
	KindClient:   tracepb.Span_SPAN_KIND_CLIENT,
	KindInternal: tracepb.Span_SPAN_KIND_INTERNAL,
}

// statusText holds the decimal text of statuses 100 to 599, made once, for
// error.type without a conversion per span.
var statusText = func() (t [600]string) {
	for i := 100; i < len(t); i++ {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

func (m *spanMsg) fill(r *record) {
	sp := &m.span
	sp.TraceId = r.trace[:]
	sp.SpanId = r.id[:]
	sp.ParentSpanId = nil
	// The parent, when there is one, is the client's span: remote.
	sp.Flags = uint32(r.flags) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if !r.parent.IsZero() {
		sp.ParentSpanId = r.parent[:]
		sp.Flags |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	sp.TraceState = r.get(r.str[strTraceState])
	sp.Name = r.get(r.str[strName])
	sp.Kind = tracepb.Span_SPAN_KIND_SERVER
	if int(r.kind) < len(kinds) {
		sp.Kind = kinds[r.kind]
	}
	sp.StartTimeUnixNano = uint64(max(r.start, 0))
	sp.EndTimeUnixNano = uint64(max(r.end, 0))

	n := 0
	str := func(key string, ref strRef) {
		if ref.n > 0 {
			m.attrs[n].setString(key, r.get(ref))
			m.attrPtrs[n] = &m.attrs[n].kv
			n++
		}
	}
	num := func(key string, v int) {
		m.attrs[n].setInt(key, int64(v))
		m.attrPtrs[n] = &m.attrs[n].kv
		n++
	}
	text := func(key, v string) {
		m.attrs[n].setString(key, v)
		m.attrPtrs[n] = &m.attrs[n].kv
		n++
	}
	str("http.request.method", r.str[strMethod])
	str("http.request.method_original", r.str[strMethodOriginal])
	str("url.path", r.str[strPath])
	str("url.scheme", r.str[strScheme])
	str("server.address", r.str[strServerAddr])
	if r.serverPort > 0 {
		num("server.port", r.serverPort)
	}
	str("network.protocol.version", r.str[strProtoVersion])
	str("client.address", r.str[strClientAddr])
	if r.clientPort > 0 {
		num("client.port", r.clientPort)
	}
	if r.status > 0 {
		num("http.response.status_code", r.status)
	}
	failed := r.status >= 500 && r.status < len(statusText)
	if failed {
		text("error.type", statusText[r.status])
	}
	if r.grpc >= 0 {
		text("rpc.system", "grpc")
		num("rpc.grpc.status_code", r.grpc)
		failed = failed || grpcServerFault(r.grpc)
	}
	str("relay.route", r.str[strRoute])
	str("relay.pool", r.str[strPool])
	str("relay.backend", r.str[strBackend])
	num("relay.retries", r.retries)
	str("relay.request_id", r.str[strRequestID])
	sp.Attributes = m.attrPtrs[:n]

	sp.Status = nil
	if failed {
		// OpenTelemetry leaves a server span's status unset for 4xx: the
		// client's fault, not the server's.
		m.status.Code = tracepb.Status_STATUS_CODE_ERROR
		sp.Status = &m.status
	}

	sp.Events = nil
	sp.DroppedEventsCount = uint32(r.dropped)
	if r.nEvents > 0 {
		if m.events == nil {
			m.events = new([MaxEvents]eventMsg)
		}
		for i := range r.nEvents {
			er, em := &r.events[i], &m.events[i]
			em.ev.Name = "relay.attempt.failed"
			em.ev.TimeUnixNano = uint64(max(er.time, 0))
			k := 0
			if er.backend.n > 0 {
				em.attrs[k].setString("relay.backend", r.get(er.backend))
				em.attrPtrs[k] = &em.attrs[k].kv
				k++
			}
			if er.reason.n > 0 {
				em.attrs[k].setString("error.type", r.get(er.reason))
				em.attrPtrs[k] = &em.attrs[k].kv
				k++
			}
			em.ev.Attributes = em.attrPtrs[:k]
			m.evPtrs[i] = &em.ev
		}
		sp.Events = m.evPtrs[:r.nEvents]
	}
}

func (a *attrMsg) setString(key, v string) {
	a.kv.Key = key
	a.s.StringValue = v
	a.v.Value = &a.s
	a.kv.Value = &a.v
}

func (a *attrMsg) setInt(key string, v int64) {
	a.kv.Key = key
	a.i.IntValue = v
	a.v.Value = &a.i
	a.kv.Value = &a.v
}

// grpcServerFault reports whether a gRPC status is one OpenTelemetry's RPC
// conventions count as a server span's error: UNKNOWN, DEADLINE_EXCEEDED,
// UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS.
func grpcServerFault(code int) bool {
	switch code {
	case 2, 4, 12, 13, 14, 15:
		return true
	}
	return false
}
