package core

import (
	"time"

	"relay/internal/backend"
	"relay/internal/h1"
	"relay/internal/stats"
	"relay/internal/trace"
)

// Tracing takes part in W3C Trace Context (the tracing: section): every
// request gets a server span of relay's, under the client's traceparent
// when it sent a valid one (a malformed one is ignored, and relay starts
// a trace), and the backend gets exactly one traceparent, whose parent
// is relay's span, and the client's tracestate. Sampling is decided here,
// per trace id, without allocating: an unsampled request costs two random
// ids and one field. Only a sampled request fills a span, at its end,
// for the exporter, which never blocks it.
//
// Every attempt of a request carries the same traceparent: a backend's
// span of any attempt hangs under relay's one span, whose relay.retries
// says how many attempts were retried.
type Tracing struct {
	sampler trace.Sampler
	spans   Spans
}

// Spans is where sampled spans go: Export must not block and must copy
// what it keeps (a *trace.Exporter); the counts are its metrics.
type Spans interface {
	Export(*trace.Span)
	Exported() uint64
	Dropped() uint64
	Failed() uint64
}

// NewTracing returns the feature that samples by s and hands sampled
// spans to spans.
func NewTracing(s trace.Sampler, spans Spans) *Tracing {
	return &Tracing{sampler: s, spans: spans}
}

// stats adds what became of the sampled spans to st.
func (t *Tracing) stats(st *stats.Process) {
	st.Spans.Exported += t.spans.Exported()
	st.Spans.Dropped += t.spans.Dropped()
	st.Spans.Failed += t.spans.Failed()
}

// traceSlot holds a request's traceState.
var traceSlot = NewSlot()

// traceState is what tracing knows of one request: its trace, relay's
// span and the flags sent on, the client's tracestate as relay passes it
// on (copied: the head's bytes may be overwritten by the body's; at most
// 512 bytes), the trace id in hex
// for the access log, and, for a sampled request, the span being filled
// with the head's parts it needs, copied as the request arrived.
type traceState struct {
	parent  trace.Parent
	trace   trace.TraceID
	id      trace.SpanID
	flags   byte
	sampled bool
	state   []byte
	hex     []byte
	span    trace.Span
}

// readState gathers the request's tracestate fields into the one relay
// passes on: checked, and cut by whole entries to 512 bytes
// (trace.TraceState); none when any of them is malformed.
func (st *traceState) readState(fields []h1.Field) {
	var ts trace.TraceState
	for i := range fields {
		f := &fields[i]
		if len(f.Name) == len("tracestate") && f.Is("tracestate") {
			ts.Add(f.Value)
		}
	}
	st.state = ts.Append(st.state[:0])
}

func (*Tracing) FeatureName() string { return "tracing" }

// Accept reads the client's trace context and decides whether the
// request is sampled. The client's traceparent and tracestate fields are
// marked Hop: relay sends its own. Two traceparent fields make the
// context invalid, as W3C Trace Context says.
func (t *Tracing) Accept(x *Exchange) {
	st := SlotState[traceState](x, traceSlot)
	st.parent, st.state, st.hex = trace.Parent{}, st.state[:0], st.hex[:0]
	parents, states := 0, false
	fields := x.Req.Fields
	for i := range fields {
		f := &fields[i]
		switch len(f.Name) {
		case len("traceparent"):
			if f.Is("traceparent") {
				f.Hop = true
				if parents++; parents == 1 {
					st.parent = trace.ParseTraceparent(f.Value)
				} else {
					st.parent = trace.Parent{}
				}
			}
		case len("tracestate"):
			if f.Is("tracestate") {
				f.Hop, states = true, true
			}
		}
	}
	if !st.parent.Valid {
		// A tracestate without a valid traceparent means nothing, and
		// is not read.
		st.trace = trace.NewTraceID()
	} else {
		st.trace = st.parent.Trace
		if states {
			st.readState(fields)
		}
	}
	st.id = trace.NewSpanID()
	st.sampled = t.sampler.Sample(st.parent, st.trace)
	st.flags = st.parent.ChildFlags(st.sampled)
	if st.sampled {
		s := &st.span
		s.Reset()
		s.Method, s.Target = string(x.Req.Method), string(x.Req.Target)
		s.Host, s.Scheme = string(x.Req.Host), string(x.Peer.Scheme())
	}
}

// UpstreamHead sends the backend relay's span as its parent.
func (t *Tracing) UpstreamHead(x *Exchange, out []byte) []byte {
	x.keepOutOfTrailers("traceparent,tracestate,")
	st := SlotState[traceState](x, traceSlot)
	out = append(out, "traceparent: "...)
	out = trace.AppendTraceparent(out, st.trace, st.id, st.flags)
	out = append(out, '\r', '\n')
	if len(st.state) > 0 {
		out = h1.AppendField(out, traceStateField, st.state)
	}
	return out
}

var traceStateField = []byte("tracestate")

// AttemptFailed records an attempt that did not answer on a sampled
// request's span, as a relay.attempt.failed event with the backend and
// why; past trace.MaxEvents the exporter counts the rest as dropped
// (config bounds a request's attempts to eight, MaxEvents).
func (t *Tracing) AttemptFailed(x *Exchange, b *backend.Backend, why string, at time.Time) {
	st := SlotState[traceState](x, traceSlot)
	if st.sampled {
		st.span.Events = append(st.span.Events, trace.Event{Time: at, Backend: b.Name, Reason: why})
	}
}

// Done hands a sampled request's span to the exporter.
func (t *Tracing) Done(x *Exchange, o Outcome, took time.Duration) {
	st := SlotState[traceState](x, traceSlot)
	if !st.sampled {
		return
	}
	s := &st.span
	s.Trace, s.ID, s.Flags = st.trace, st.id, st.flags
	if st.parent.Valid {
		s.Parent = st.parent.Span
	}
	s.TraceState = st.state
	s.Start, s.End = x.start, x.start.Add(took)
	s.Proto, s.Status, s.Route = x.Proto, o.Status, x.routeName
	s.Retries, s.GRPCStatus = o.Retries, o.GRPCStatus
	s.RequestID = string(x.rid)
	s.ClientAddr = x.Peer.Addr.String()
	if x.pool != nil {
		s.Pool = x.pool.Name()
	}
	if o.Backend != nil {
		s.Backend = o.Backend.Name
	}
	t.spans.Export(s)
}

// traceID returns x's trace id in hex, for the access log.
func (t *Tracing) traceID(x *Exchange) []byte {
	st := SlotState[traceState](x, traceSlot)
	if len(st.hex) == 0 {
		st.hex = st.trace.AppendHex(st.hex)
	}
	return st.hex
}
