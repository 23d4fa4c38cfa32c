package core

import (
	"bytes"
	"errors"

	"relay/internal/backend"
	"relay/internal/h1"
)

// errClientBody marks a failure to read the request body from the client.
var errClientBody = errors.New("reading request body from client")

// prepare builds the request as the backend will see it: request line,
// Host, the fields of the upstream request phase (X-Forwarded-*, Via and
// the others the features write), the client's end-to-end fields, those
// the features append, framing, and the body bytes the front door
// already holds. The rest of the body is left for send to stream. b
// supplies Host for HTTP/1.0 clients that sent none, since HTTP/1.1
// requires it (rehost gives a retry its own backend's).
func (x *Exchange) prepare(b *backend.Backend) {
	req := x.Req
	x.inline = 0
	out := h1.AppendRequestLine(x.head[:0], req.Method, req.Target)
	if req.Host != nil {
		out = h1.AppendField(out, hostField, req.Host)
	} else {
		out = h1.AppendFieldString(out, "Host", b.URL.Host)
	}
	x.trailHops = x.trailHops[:0]
	out = x.chain.upstreamHead(x, out)
	out = h1.AppendForwardFields(out, req.Fields)
	out = x.chain.appendUpstream(x, out)
	if req.Upgrade {
		out = append(out, "Connection: Upgrade\r\n"...)
		out = h1.AppendField(out, upgradeField, req.UpgradeProto)
	}
	switch {
	case req.Chunked:
		out = append(out, "Transfer-Encoding: chunked\r\n"...)
		// The fields the head's Connection names stay out of the
		// trailers as well as those the features removed. The names are
		// copied now: the head's bytes may be overwritten by the body's.
		x.trailHops = h1.AppendConnection(x.trailHops, req.Fields)
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

// rehost gives the prepared head of a request that came without Host
// (HTTP/1.0) the Host of b, the backend of a retry: prepare wrote the
// first attempt's backend's, the line after the request line.
func (x *Exchange) rehost(b *backend.Backend) {
	h := x.head
	i := bytes.Index(h, crlf) + 2
	j := i + bytes.Index(h[i:], crlf) + 2
	line, host := h[i:j], b.URL.Host
	if len(line) == len("Host: ")+len(host)+2 && string(line[len("Host: "):len(line)-2]) == host {
		return
	}
	rest := append([]byte(nil), h[j:]...)
	x.head = append(h1.AppendFieldString(h[:i], "Host", host), rest...)
}

// keepOutOfTrailers adds names, each followed by a comma, to the fields
// kept out of the request's trailers: a feature of the upstream request
// phase names the fields it writes or removes in the head, or a client
// would get its own past the feature by sending it after the body. A
// request without a body has no trailers.
func (x *Exchange) keepOutOfTrailers(names string) {
	if x.Body != nil {
		x.trailHops = append(x.trailHops, names...)
	}
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
