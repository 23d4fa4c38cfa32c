package core

import (
	"errors"

	"relay/internal/backend"
	"relay/internal/h1"
)

// errClientBody marks a failure to read the request body from the client.
var errClientBody = errors.New("reading request body from client")

// prepare builds the request as the backend will see it: request line,
// Host, X-Forwarded-*, Via, the client's end-to-end fields, framing, and the
// body bytes the front door already holds. The rest of the body is left for
// send to stream. b supplies Host for HTTP/1.0 clients that sent none,
// since HTTP/1.1 requires it.
func (x *Exchange) prepare(c *Core, b *backend.Backend) {
	req := x.Req
	x.inline = 0
	out := h1.AppendRequestLine(x.head[:0], req.Method, req.Target)
	if req.Host != nil {
		out = h1.AppendField(out, hostField, req.Host)
	} else {
		out = h1.AppendFieldString(out, "Host", b.URL.Host)
	}
	out = x.appendForwarded(c, out)
	out = x.chain.upstreamHead(x, out)
	if x.reqOps != nil {
		x.reqOps.drop(req.Fields)
	}
	if t := x.stickyT; t != nil && t.indirect {
		// The sticky cookie is written out of the request here, not
		// cut from its fields: their bytes may be the HTTP/2 decoder's
		// strings, and the hash key and lookups read them as sent.
		out = t.appendForwardFields(out, req.Fields)
	} else {
		out = h1.AppendForwardFields(out, req.Fields)
	}
	if x.reqOps != nil {
		for _, f := range x.reqOps.add {
			out = h1.AppendField(out, f.Name, f.Value)
		}
	}
	if req.Upgrade {
		out = append(out, "Connection: Upgrade\r\n"...)
		out = h1.AppendField(out, upgradeField, req.UpgradeProto)
	}
	switch {
	case req.Chunked:
		out = append(out, "Transfer-Encoding: chunked\r\n"...)
		// The fields the head's Connection names and those the route
		// removes stay out of the trailers as well. The names are
		// copied now: the head's bytes may be overwritten by the body's.
		x.trailHops = h1.AppendConnection(x.trailHops[:0], req.Fields)
		if x.reqOps != nil {
			x.trailHops = append(x.trailHops, x.reqOps.names...)
		}
	case req.ContentLength > 0:
		out = h1.AppendContentLength(out, req.ContentLength)
	case needsLength(req.Method):
		// Some servers refuse a POST without a length (411).
		out = append(out, "Content-Length: 0\r\n"...)
	}
	out = append(out, '\r', '\n')
	if x.Body != nil && !req.Chunked {
		// Prefix is at most the body: a held body whole, or what the
		// front door already holds of a streamed one.
		if p := x.Body.Prefix(); len(p) > 0 {
			out = append(out, p...)
			x.inline = int64(len(p))
		}
	}
	x.head = out
	x.prepared = true
}

var (
	hostField    = []byte("Host")
	upgradeField = []byte("Upgrade")
)

func needsLength(method []byte) bool {
	switch string(method) {
	case "POST", "PUT", "PATCH":
		return true
	}
	return false
}
