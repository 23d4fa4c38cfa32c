package proxy

import (
	"time"

	"relay/internal/h1"
)

// maxInlineBody is the largest request body prefix handed to the core as
// already in memory, to go out with the request head in one write.
const maxInlineBody = 16 << 10

// clientBody is the request body of a client connection as the core reads
// it (core.Body): bytes framed by Content-Length or chunked, read within
// the time Config.BodyTime gives.
type clientBody struct {
	cc    *clientConn
	b     h1.Body
	start time.Time // when the head was read
	got   int64     // body bytes read so far
}

// reset frames the body of the request just read.
func (cb *clientBody) reset() {
	cb.start, cb.got = time.Now(), 0
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

// Read reads body bytes within the body's deadline.
func (cb *clientBody) Read(p []byte) (int, error) {
	bt := cb.cc.p.cfg.BodyTime()
	cb.cc.conn.SetReadDeadline(bt.Deadline(time.Now(), cb.start, cb.got))
	n, err := cb.b.Read(p)
	cb.got += int64(n)
	return n, err
}

// Done reports whether the body has been read to its end.
func (cb *clientBody) Done() bool { return cb.b.Done() }

// Trailers returns a chunked body's raw trailer lines after its end.
func (cb *clientBody) Trailers() []byte { return cb.b.Trailers() }
