package trace

import "time"

// Kind is a span's kind in OpenTelemetry's terms. The zero Kind is
// KindServer, the only one relay's core records, so the core never sets it.
type Kind uint8

// Kinds of span.
const (
	KindServer Kind = iota
	KindClient
	KindInternal
)

// Span is one server span of relay: a request as the forwarding core saw
// it, from its head to the end of its answer. The core fills it for a
// sampled request, in a Span of its own that it reuses, and hands it to
// Exporter.Export, which copies what it needs. Its fields are plain values
// rather than a map of attributes, so that filling one allocates nothing;
// the exporter names them by OpenTelemetry's semantic conventions (given
// with each field).
//
// Retries are events on this span, not child spans: relay records one
// span per request, and every attempt carries the same traceparent (relay's
// span as the parent), so a backend's span of any attempt hangs under
// relay's one span. Child client spans would need a span id per attempt in
// the traceparent each attempt sends, and a span object per attempt, for
// what one event says: which backend failed, when and why. The backend
// that answered, the final status and the number of retries are fields.
type Span struct {
	// Trace and ID are the span's trace and its own id, the parent-id
	// relay sends on to the backend.
	Trace TraceID
	ID    SpanID
	// Parent is the caller's span from the request's traceparent; zero
	// when relay started the trace.
	Parent SpanID
	// Flags are the trace flags relay sent on (Parent.ChildFlags).
	Flags byte
	// TraceState is the request's tracestate as relay passes it on: its
	// fields joined and checked, at most 512 bytes (TraceState.Append);
	// one longer is left out of the span.
	TraceState []byte
	// Kind is KindServer unless set.
	Kind Kind
	// Name is the span's name. Empty, the exporter names it as
	// OpenTelemetry's HTTP conventions do, from low-cardinality parts: the
	// method and relay's route name ("GET api"), or the method alone when
	// no route matched. A path is never a name: there would be one per URL.
	Name string
	// Start is when the request's head was read; End when its answer ended.
	Start, End time.Time

	// Method is the request method: http.request.method (a method outside
	// the registered ones becomes "_OTHER", with the original in
	// http.request.method_original).
	Method string
	// Target is the request target: its path becomes url.path; the query is
	// left out, since query strings carry tokens.
	Target string
	// Host is the Host or :authority: server.address and server.port.
	Host string
	// Scheme is "http" or "https": url.scheme.
	Scheme string
	// Proto is the client's protocol, "HTTP/1.1" or "HTTP/2.0" (or
	// "HTTP/2"): network.protocol.version ("1.1", "2").
	Proto string
	// Status is the status relay answered with: http.response.status_code.
	// 5xx marks the span as an error, with error.type the status; 0 (no
	// answer was sent) is left out.
	Status int
	// Route is the name of the route that matched: relay.route.
	Route string
	// Pool is the pool that served: relay.pool.
	Pool string
	// Backend is the backend that answered last: relay.backend.
	Backend string
	// Retries is how many attempts were retried: relay.retries.
	Retries int
	// GRPCStatus is the grpc-status of a gRPC call, in decimal:
	// rpc.grpc.status_code (and rpc.system "grpc"); codes a server reports
	// as its own failure (UNKNOWN, DEADLINE_EXCEEDED, UNIMPLEMENTED,
	// INTERNAL, UNAVAILABLE, DATA_LOSS) mark the span as an error.
	GRPCStatus string
	// RequestID is the request's X-Request-Id: relay.request_id.
	RequestID string
	// ClientAddr is the client's address, "IP" or "IP:PORT", after trusted
	// proxies: client.address and client.port.
	ClientAddr string
	// Events are the attempts on backends that failed, in order: each but
	// the last was retried, and the last too when a later attempt
	// answered. The exporter keeps the first MaxEvents and counts the
	// rest as dropped.
	Events []Event
}

// Event is one failed attempt on a backend: an event named
// "relay.attempt.failed" on the request's span.
type Event struct {
	// Time is when the attempt failed.
	Time time.Time
	// Backend is the backend the attempt went to: relay.backend.
	Backend string
	// Reason says why it failed, in a few words ("connect refused",
	// "503"): error.type.
	Reason string
}

// Bounds on what one span holds in the exporter's queue, so that the
// queue's memory is bounded by its length.
const (
	// MaxEvents is the most events a span keeps.
	MaxEvents = 8
	// MaxValueLen is the longest string value a span keeps; a longer one
	// is cut at that length.
	MaxValueLen = 1024
	// maxTraceState is W3C's limit on tracestate that a vendor must pass on.
	maxTraceState = 512
)

// Reset empties s for the next request, keeping its Events array.
func (s *Span) Reset() { *s = Span{Events: s.Events[:0]} }
