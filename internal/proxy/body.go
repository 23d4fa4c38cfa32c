package proxy

import (
	"time"

	"relay/internal/h1"
)

// maxInlineBody is the largest request body prefix handed to the core as
// already in memory, to go out with the request head in one write.
const maxInlineBody = 16 << 10

// clientBody is the request body of a client connection as the core reads
// it (core.Body): bytes framed by Content-Length or chunked, each wait for
// the client bounded by IdleTimeout.
type clientBody struct {
	cc *clientConn
	b  h1.Body
}

// reset frames the body of the request just read.
func (cb *clientBody) reset() {
	req := &cb.cc.req
	if req.Chunked {
		cb.b.Reset(cb.cc.br, h1.BodyChunked, -1)
	} else {
		cb.b.Reset(cb.cc.br, h1.BodyLength, req.ContentLength)
	}
}

// Prefix hands over the body bytes that arrived with the head, when the
// whole of them is small enough to copy into the upstream request's head.
func (cb *clientBody) Prefix() []byte {
	req, br := &cb.cc.req, cb.cc.br
	if req.Chunked {
		return nil
	}
	k := min(int64(br.Buffered()), cb.b.Remaining())
	if k == 0 || k > maxInlineBody {
		return nil
	}
	p := br.Peek()[:k]
	br.Discard(int(k))
	cb.b.Reset(br, h1.BodyLength, cb.b.Remaining()-k)
	return p
}

// Read reads body bytes, waiting at most IdleTimeout for each.
func (cb *clientBody) Read(p []byte) (int, error) {
	cb.cc.conn.SetReadDeadline(time.Now().Add(cb.cc.p.cfg.IdleTimeout))
	return cb.b.Read(p)
}

// Done reports whether the body has been read to its end.
func (cb *clientBody) Done() bool { return cb.b.Done() }

// Trailers returns a chunked body's raw trailer lines after its end.
func (cb *clientBody) Trailers() []byte { return cb.b.Trailers() }
