package core

import (
	"time"

	"relay/internal/logging"
)

// accessLog writes one line per request (Config.AccessLog): it copies
// what the line needs of the head as the request arrives, since the
// head's bytes may be overwritten once body bytes are read, and writes
// the line when the request is done.
type accessLog struct {
	log *logging.AccessLog
	// trace, when tracing is on, gives the line the request's trace id.
	trace *Tracing
}

// accessSlot holds a request's logState.
var accessSlot = NewSlot()

// logState is what the line of one request needs of its head: method,
// target, User-Agent and Referer, one after the other, the agent
// starting at agent and the referer at referer.
type logState struct {
	line           []byte
	method         int
	agent, referer int
}

func (*accessLog) FeatureName() string { return "access log" }

// Accept copies the method, the target, User-Agent and Referer (each
// header value at most one byte past what a line holds, so the line can
// still say it was cut).
func (*accessLog) Accept(x *Exchange) {
	st := SlotState[logState](x, accessSlot)
	var agent, referer []byte
	fields := x.Req.Fields
	for i := range fields {
		f := &fields[i]
		switch len(f.Name) {
		case len("user-agent"):
			if agent == nil && f.Is("user-agent") {
				agent = f.Value
			}
		case len("referer"):
			if referer == nil && f.Is("referer") {
				referer = f.Value
			}
		}
	}
	const most = logging.MaxValueBytes + 1
	b := append(append(st.line[:0], x.Req.Method...), x.Req.Target...)
	st.method = len(x.Req.Method)
	st.agent = len(b)
	b = append(b, agent[:min(len(agent), most)]...)
	st.referer = len(b)
	st.line = append(b, referer[:min(len(referer), most)]...)
}

// Done writes the request's line.
func (l *accessLog) Done(x *Exchange, o Outcome, took time.Duration) {
	st := SlotState[logState](x, accessSlot)
	e := logging.Entry{
		Time: x.start, Client: x.Peer.Addr, Method: st.line[:st.method], Path: st.line[st.method:st.agent], Proto: x.Proto, TLS: x.Peer.TLS,
		Status: o.Status, Duration: took, BytesIn: o.In, BytesOut: o.Out,
		UserAgent: st.line[st.agent:st.referer], Referer: st.line[st.referer:], RequestID: x.rid,
		UpstreamConnect: x.connect, UpstreamResponse: x.response, GRPCStatus: o.GRPCStatus, Route: x.routeName,
		ClientCertSubject: x.Peer.Client.Subject(),
	}
	if l.trace != nil {
		e.TraceID = l.trace.traceID(x)
	}
	if o.Backend != nil {
		e.Backend = o.Backend.Name
	}
	if x.pool != nil {
		e.Pool = x.pool.Name()
	}
	l.log.Log(&e)
}
