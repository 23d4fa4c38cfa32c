package proxy

import (
	"errors"

	"relay/internal/backend"
	"relay/internal/h1"
)

// errClientBody marks a failure to read the request body from the client.
var errClientBody = errors.New("reading request body from client")

// maxInlineBody is the largest request body prefix copied into the request
// head's buffer so head and body go out in one write.
const maxInlineBody = 16 << 10

// prepareRequest builds the request as the backend will see it: request
// line, Host, the client's end-to-end fields, X-Forwarded-*, framing, and
// whatever body bytes arrived with the head. The rest of the body is left
// for sendRequest to stream. b supplies Host for HTTP/1.0 clients that sent
// none, since HTTP/1.1 requires it.
func (cc *clientConn) prepareRequest(b *backend.Backend) {
	req := &cc.req
	cc.inline = 0
	out := h1.AppendRequestLine(cc.reqOut[:0], req.Method, req.Target)
	if req.Host != nil {
		out = h1.AppendField(out, hostField, req.Host)
	} else {
		out = h1.AppendFieldString(out, "Host", b.URL.Host)
	}
	out = cc.appendForwarded(out)
	out = h1.AppendForwardFields(out, req.Fields)
	switch {
	case req.Upgrade:
		out = append(out, "Connection: Upgrade\r\n"...)
		out = h1.AppendField(out, upgradeField, req.UpgradeProto)
	}
	switch {
	case req.Chunked:
		out = append(out, "Transfer-Encoding: chunked\r\n"...)
	case req.ContentLength > 0:
		out = h1.AppendContentLength(out, req.ContentLength)
	case needsLength(req.Method):
		// Some servers refuse a POST without a length (411).
		out = append(out, "Content-Length: 0\r\n"...)
	}
	out = append(out, '\r', '\n')
	switch {
	case req.Chunked:
		cc.reqBody.Reset(cc.br, h1.BodyChunked, -1)
	case req.ContentLength > 0:
		k := int64(cc.br.Buffered())
		if k > req.ContentLength {
			k = req.ContentLength
		}
		if k > maxInlineBody {
			k = 0
		}
		out = append(out, cc.br.Peek()[:k]...)
		cc.br.Discard(int(k))
		cc.inline = k
		cc.reqBody.Reset(cc.br, h1.BodyLength, req.ContentLength-k)
	default:
		cc.reqBody.Reset(cc.br, h1.BodyNone, 0)
	}
	cc.reqOut = out
	cc.prepared = true
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

// continueLine answers Expect: 100-continue; relay asks for the body itself
// instead of passing the expectation on.
var continueLine = []byte("HTTP/1.1 100 Continue\r\n\r\n")

// sendRequest writes the prepared request to u and streams the rest of the
// body from the client. in counts body bytes sent. A client-side failure is
// wrapped in errClientBody.
func (cc *clientConn) sendRequest(u *upstream) (in int64, err error) {
	if cc.reqBody.Done() {
		// Head and body are complete in reqOut: write them inside the
		// wait for the response (see upstream.Read).
		u.send(cc.reqOut)
		return cc.inline, nil
	}
	if _, err := u.conn.Write(cc.reqOut); err != nil {
		return 0, err
	}
	if cc.req.Expect100 && !cc.streamed {
		if _, err := cc.conn.Write(continueLine); err != nil {
			return 0, errors.Join(errClientBody, err)
		}
	}
	cc.streamed = true
	n, rerr, werr := pump(u.conn, &cc.reqBody, cc.conn, cc.req.Chunked, cc.p.cfg.IdleTimeout)
	in = cc.inline + n
	if rerr != nil {
		return in, errors.Join(errClientBody, rerr)
	}
	return in, werr
}
