package core

import (
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"

	"relay/internal/h1"
	"relay/internal/logging"
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

// readHead takes from the request's fields what the request id and the
// access log need, copied, since the head's bytes may be overwritten once
// body bytes are read: the id (x.rid), and for the access log the method
// and target, User-Agent and Referer (x.logLine, each header value at most
// one byte past what a line holds, so the line can still say it was cut).
// With request ids on, the client's X-Request-Id fields are marked Hop:
// relay sends the id it settled on in their place.
func (x *Exchange) readHead(c *Core) {
	logged := c.cfg.AccessLog != nil
	var kept, agent, referer []byte
	fields := x.Req.Fields
	for i := range fields {
		f := &fields[i]
		switch len(f.Name) {
		case len("x-request-id"):
			if c.cfg.RequestID && f.Is("x-request-id") {
				if kept == nil && x.Peer.Trusted && !f.Hop && wellFormedRequestID(f.Value) {
					kept = f.Value
				}
				f.Hop = true
			}
		case len("user-agent"):
			if logged && agent == nil && f.Is("user-agent") {
				agent = f.Value
			}
		case len("referer"):
			if logged && referer == nil && f.Is("referer") {
				referer = f.Value
			}
		}
	}
	x.rid = x.rid[:0]
	if c.cfg.RequestID {
		if kept != nil {
			x.rid = append(x.rid, kept...)
		} else {
			x.rid = c.ids.next(x.rid)
		}
	}
	if logged {
		const most = logging.MaxValueBytes + 1
		b := append(append(x.logLine[:0], x.Req.Method...), x.Req.Target...)
		x.logAgent = len(b)
		b = append(b, agent[:min(len(agent), most)]...)
		x.logReferer = len(b)
		x.logLine = append(b, referer[:min(len(referer), most)]...)
	}
}

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
