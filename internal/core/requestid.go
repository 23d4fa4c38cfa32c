package core

import (
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"

	"relay/internal/h1"
)

// Request ids (X-Request-Id). With Config.RequestID every request relay
// forwards carries one to the backend, the client gets it back on the
// response, relay's own error responses included, and the access log line
// holds it, so that one id ties the client's report, the backend's log and
// relay's log together.
//
// A trusted proxy's X-Request-Id is kept when it is well formed (1 to
// maxRequestIDBytes visible ASCII bytes): the edge in front of relay made
// the id, and the trace goes on under it. Anyone else's is replaced, as is
// a malformed one: an id a client chose could collide with another's on
// purpose, or carry what a log reader would take for something else.
//
// relay makes an id from a prefix drawn at random once per process and a
// counter, 32 hex digits in all: unique across processes and relays
// without a random draw, a lock or an allocation per request.

// maxRequestIDBytes bounds a trusted proxy's X-Request-Id that relay keeps;
// Heroku's router, for one, takes ids of up to 200 characters.
const maxRequestIDBytes = 200

// requestIDs makes request ids.
type requestIDs struct {
	prefix [16]byte // 8 random bytes in hex, drawn once
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [8]byte
	rand.Read(b[:])
	g := new(requestIDs)
	hex.Encode(g.prefix[:], b[:])
	return g
}

// next appends a new id to b.
func (g *requestIDs) next(b []byte) []byte {
	n := g.n.Add(1)
	var d [16]byte
	for i := len(d) - 1; i >= 0; i-- {
		d[i] = hexDigits[n&0xf]
		n >>= 4
	}
	b = append(b, g.prefix[:]...)
	return append(b, d[:]...)
}

const hexDigits = "0123456789abcdef"

// wellFormedRequestID reports whether v may be kept as a request id:
// 1 to maxRequestIDBytes bytes of visible ASCII (no space, no control
// byte), which passes through logs and header fields as it is.
func wellFormedRequestID(v []byte) bool {
	if len(v) == 0 || len(v) > maxRequestIDBytes {
		return false
	}
	for _, c := range v {
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

// requestIDFeature gives every request an id (Config.RequestID): it
// settles on the id as the request arrives, sends it to the backend and
// puts it on the response.
type requestIDFeature struct{ ids *requestIDs }

func (requestIDFeature) FeatureName() string { return "request id" }

// Accept settles on the request's id (x.rid), copied, since the head's
// bytes may be overwritten once body bytes are read: a trusted proxy's
// well-formed X-Request-Id, else a new one. The client's X-Request-Id
// fields are marked Hop: relay sends the id it settled on in their place.
func (f requestIDFeature) Accept(x *Exchange) {
	var kept []byte
	fields := x.Req.Fields
	for i := range fields {
		fl := &fields[i]
		if len(fl.Name) == len("x-request-id") && fl.Is("x-request-id") {
			if kept == nil && x.Peer.Trusted && !fl.Hop && wellFormedRequestID(fl.Value) {
				kept = fl.Value
			}
			fl.Hop = true
		}
	}
	if kept != nil {
		x.rid = append(x.rid[:0], kept...)
	} else {
		x.rid = f.ids.next(x.rid[:0])
	}
}

// UpstreamHead sends the backend the request's id.
func (requestIDFeature) UpstreamHead(x *Exchange, out []byte) []byte {
	x.keepOutOfTrailers("x-request-id,")
	return h1.AppendField(out, RequestIDField, x.rid)
}

// InterimHead names an informational response by relay's id too, never
// by one the backend made up.
func (requestIDFeature) InterimHead(x *Exchange, resp *h1.Response) { x.answerWithID(resp) }

// ResponseHead names the response by relay's id, never by one the backend
// made up. The response's trailers are left as the backend sent them:
// filtering them would cost every gRPC answer, whose status is in its
// trailers, a pass over them.
func (requestIDFeature) ResponseHead(x *Exchange, resp *h1.Response) { x.answerWithID(resp) }

// RequestID returns the id of the request being forwarded, which a front
// door's own error response carries as X-Request-Id; nil when request ids
// are off or no request is being forwarded. It aliases the exchange's
// memory until Forward returns.
func (x *Exchange) RequestID() []byte {
	if len(x.rid) == 0 {
		return nil
	}
	return x.rid
}

// RequestIDField is the header field that carries a request's id, to the
// backend and back to the client.
var RequestIDField = []byte("X-Request-Id")

// answerWithID marks the backend's own X-Request-Id fields in resp Hop and
// adds relay's: the client learns the id relay's log and the backend were
// given, whatever the backend echoed.
func (x *Exchange) answerWithID(resp *h1.Response) {
	for i := range resp.Fields {
		if f := &resp.Fields[i]; len(f.Name) == len("x-request-id") && f.Is("x-request-id") {
			f.Hop = true
		}
	}
	resp.Fields = append(resp.Fields, h1.Field{Name: RequestIDField, Value: x.rid})
}
