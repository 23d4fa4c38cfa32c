package health

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"

	"relay/internal/h1"
)

// A probe reads its answer with relay's own HTTP/1.1 engine, the one the
// data path reads every backend response with, so a probe passes only a
// backend whose answers the proxy would accept too: a lenient probe reader
// would keep in rotation a backend whose every response relay refuses (a
// bare LF, a folded header, conflicting lengths). The engine also says
// exactly where the answer ends, so a kept connection is left at the start
// of the next one.

// maxDrain bounds how much of a health response body is read. The body is
// read so that a backend that sends a 2xx head and then stalls fails the
// check, but a chatty status page should not cost more than this: a 2xx
// still going after maxDrain bytes passes, and its connection is closed.
const maxDrain = 64 << 10

// maxInterim bounds the interim (1xx) responses skipped before the final one.
const maxInterim = 5

// Sizes of a probe's read buffer: it starts small, since health answers
// are, and grows for a large head up to the limit the data path allows.
const (
	headBufSize = 1 << 10
	maxHead     = 64 << 10
	drainBuf    = 4 << 10
)

// answerReader is what one probe reads its answer with. Only probes in
// flight hold one: a checker's probes share a pool of them.
type answerReader struct {
	br    *h1.Reader
	resp  h1.Response
	body  h1.Body
	drain [drainBuf]byte
}

// newReadBufs returns the pool of answer readers that a checker's HTTP
// probes share.
func newReadBufs() *sync.Pool {
	return &sync.Pool{New: func() any { return &answerReader{br: h1.NewReader(nil, headBufSize, maxHead)} }}
}

// read reads the answer to one probe from conn: the final response head,
// skipping interim ones, and up to maxDrain bytes of its body. It reports
// whether the connection is left exactly at the end of a complete answer
// and may carry another probe; and errStale when reused is set and the
// connection ended before any byte of an answer arrived.
func (h *httpCheck) read(ctx context.Context, conn net.Conn, reused bool) (reusable bool, err error) {
	rd := h.bufs.Get().(*answerReader)
	rd.br.Reset(conn)
	defer func() {
		rd.br.Reset(nil)
		h.bufs.Put(rd)
	}()
	resp := &rd.resp
	for n := 0; ; n++ {
		if err := rd.br.ReadResponse(resp, false); err != nil {
			if reused && n == 0 && rd.br.Buffered() == 0 && closedByPeer(err) && ctx.Err() == nil {
				return false, errStale
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return false, h.fail(ctx, "reading response head", err)
		}
		if resp.Status >= 200 || resp.Status == 101 {
			break // 101 is final: a probe never asks to upgrade
		}
		if n == maxInterim {
			return false, fmt.Errorf("health check GET %s: more than %d interim responses", h.target, maxInterim)
		}
	}
	if reused && resp.Status == 408 {
		return false, errStale // the backend timed the idle connection out
	}
	if resp.Status < 200 || resp.Status > 299 {
		if len(resp.Reason) == 0 {
			return false, fmt.Errorf("health check GET %s: status %d", h.target, resp.Status)
		}
		return false, fmt.Errorf("health check GET %s: status %d %s", h.target, resp.Status, resp.Reason)
	}
	rd.body.Reset(rd.br, resp.Body, resp.ContentLength)
	for read := 0; !rd.body.Done() && read < maxDrain; {
		n, err := rd.body.Read(rd.drain[:min(len(rd.drain), maxDrain-read)])
		read += n
		if err == io.EOF {
			break
		}
		if err != nil {
			return false, h.fail(ctx, "reading body", err)
		}
	}
	// Bytes beyond the end of the answer mean the backend and the probe
	// disagree on where it ended: that connection is not asked again.
	return h.keep && rd.body.Done() && resp.Body != h1.BodyClose && !resp.Close &&
		resp.Minor == 1 && rd.br.Buffered() == 0, nil
}
