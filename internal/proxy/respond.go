package proxy

import (
	"relay/internal/core"
	"relay/internal/h1"
	"relay/internal/rawio"
)

// The methods in this file make a clientConn the core's Responder: they
// write what the core answers in HTTP/1.1, and decide whether the
// connection can carry another request.

// continueLine answers Expect: 100-continue; relay asks for the body itself
// instead of passing the expectation on.
var continueLine = []byte("HTTP/1.1 100 Continue\r\n\r\n")

// Continue asks the client for its body.
func (cc *clientConn) Continue() error {
	_, err := cc.conn.Write(continueLine)
	return err
}

// Interim passes an informational response on to HTTP/1.1 clients;
// HTTP/1.0 has none.
func (cc *clientConn) Interim(resp *h1.Response) error {
	if cc.req.Minor != 1 {
		return nil
	}
	cc.out = h1.AppendStatusLine(cc.out[:0], resp.Status, resp.Reason)
	cc.out = h1.AppendForwardFields(cc.out, resp.Fields)
	cc.out = append(cc.out, '\r', '\n')
	if _, err := cc.conn.Write(cc.out); err != nil {
		cc.keep = false
		return err
	}
	return nil
}

// Respond writes the response head with the body bytes that came with it
// in one write, then streams the rest, re-framing it as chunked for an
// HTTP/1.1 client when the backend ends it by closing.
func (cc *clientConn) Respond(resp *h1.Response, body *core.ResponseBody) (n int64, rerr, werr error) {
	chunked := false
	out := h1.AppendStatusLine(cc.out[:0], resp.Status, resp.Reason)
	out = h1.AppendForwardFields(out, resp.Fields)
	switch resp.Body {
	case h1.BodyNone:
		if resp.ContentLength >= 0 && resp.Status >= 200 && resp.Status != 204 {
			out = h1.AppendContentLength(out, resp.ContentLength)
		}
	case h1.BodyLength:
		out = h1.AppendContentLength(out, resp.ContentLength)
	default:
		if cc.req.Minor == 1 {
			out = append(out, "Transfer-Encoding: chunked\r\n"...)
			chunked = true
			// The fields the head's Connection names stay out of the
			// trailers too; the head's bytes are overwritten by the
			// body's, so the names are copied now.
			cc.hops = h1.AppendConnection(cc.hops[:0], resp.Fields)
		} else {
			cc.keep = false // the end of the body is the end of the connection
		}
	}
	// Request body bytes the backend did not read would be taken for the
	// next request; a draining server tells clients to go elsewhere.
	cc.keep = cc.keep && cc.bodyRead() && !cc.p.srv.stopping.Load()
	if !cc.keep {
		out = append(out, "Connection: close\r\n"...)
	} else if cc.req.Minor == 0 {
		out = append(out, "Connection: keep-alive\r\n"...)
	}
	out = append(out, '\r', '\n')
	prefix := body.Prefix()
	out = append(out, prefix...)
	n = int64(len(prefix))
	cc.out = out
	if _, werr = cc.conn.Write(out); werr != nil {
		cc.keep = false
		return n, nil, werr
	}
	if !body.Done() {
		k, rerr, werr := h1.CopyBody(cc.conn, body, chunked, cc.hops)
		n += k
		if rerr != nil || werr != nil {
			// Too late for an error response: cut the client off so it
			// sees a truncated message, not a complete wrong one.
			cc.keep = false
			return n, rerr, werr
		}
	}
	return n, nil, nil
}

// Gone reports whether the client closed or reset its connection. While
// bytes it sent are waiting in relay's buffer (requests pipelined behind
// this one) the socket is not looked at: they are served first, and the
// client's end of the stream is met when they are read.
func (cc *clientConn) Gone() bool {
	return cc.br.Buffered() == 0 && rawio.PeerGone(cc.conn.Conn)
}

// Error answers with relay's own error response, closing the connection
// when the request body was not read to its end.
func (cc *clientConn) Error(status int, msg string) (int64, error) {
	cc.keep = cc.keep && cc.bodyRead()
	n, err := cc.writeError(status, msg, !cc.keep)
	if err != nil {
		cc.keep = false
	}
	return n, err
}
