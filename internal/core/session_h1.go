package core

import (
	"errors"
	"net"
	"time"

	"relay/internal/h1"
)

// h1Session carries an attempt over an HTTP/1.1 connection to the
// backend: a pooled keep-alive connection (upstream.go) or a new one. A
// request whose head and body are whole in memory is written inside the
// wait for the response (upstream.send, rawio.Conn.WriteThenRead); one
// with a body still arriving is written first and its body streamed
// with h1.CopyBody.
type h1Session struct {
	p  *Pool
	cs *conns
	u  *upstream
	// reused says u came from the pool, so the backend may have closed
	// it meanwhile; stale that it had, and the next open dials.
	reused, stale bool
	// at is the attempt's start, when u is pooled again; from when the
	// wait for the response is timed (a new connection's: when it was
	// dialed in place of a stale one).
	at, from time.Time
}

func (h *h1Session) upgrade() string { return "" }

// open takes an idle connection or dials one. A request that must not
// be sent twice goes out on a pooled connection only if nothing has
// arrived on it; after a stale one, open dials.
func (h *h1Session) open(x *Exchange, now time.Time) error {
	if h.stale {
		u, err := x.dial(h.cs)
		if err != nil {
			return err
		}
		h.u, h.reused, h.stale, h.from = u, false, false, time.Now()
		return nil
	}
	u, reused, err := h.cs.get(now)
	if x.timed {
		// A pooled connection took no time to get: 0, without reading
		// the clock. A dial is timed from the attempt's start.
		x.connect = 0
		if !reused {
			x.connect = time.Since(now)
		}
	}
	if err != nil {
		return err
	}
	if reused && !x.Req.Idempotent() && !u.alive() {
		// A request that cannot be sent twice must not go out on a
		// connection the backend has already closed.
		u.close()
		if u, err = x.dial(h.cs); err != nil {
			return err
		}
		reused = false
	}
	h.u, h.reused, h.at, h.from = u, reused, now, now
	return nil
}

// dial dials a new connection in place of a pooled one that was lost,
// timing it for the access log.
func (x *Exchange) dial(cs *conns) (*upstream, error) {
	if !x.timed {
		return cs.dial()
	}
	start := time.Now()
	u, err := cs.dial()
	x.connect = time.Since(start)
	return u, err
}

// send writes the request, or queues it to be written by the first read
// of the response, and streams the rest of the body.
func (h *h1Session) send(x *Exchange) (in int64, sent time.Time, err error) {
	u := h.u
	u.wait(h.from, h.p.cfg().ResponseTimeout, x.Door)
	in, err = x.send(u)
	if x.streamed {
		// The wait for the answer starts once the body is sent: an
		// upload may take longer than response_timeout.
		sent = time.Now()
		u.wait(sent, h.p.cfg().ResponseTimeout, x.Door)
	} else if x.timed {
		// A request whose head and body are in x.head goes out with
		// the first read of the response.
		sent = time.Now()
	}
	if err != nil && !errors.Is(err, errClientBody) {
		// The backend stopped reading: it may still have answered, so
		// read on; reading reports the failure if not.
		h.p.core.cfg.Logger.Debug("request write failed", "err", err)
		err = nil
	}
	return in, sent, err
}

// send writes the prepared request to u and streams the rest of the body
// from the client. in counts body bytes sent. A client-side failure is
// wrapped in errClientBody.
func (x *Exchange) send(u *upstream) (in int64, err error) {
	if x.bodySent() && len(x.sent) == 0 {
		// Head and body are complete in x.head: write them inside the
		// wait for the response (see upstream.Read).
		u.send(x.head)
		return x.inline, nil
	}
	if _, err := u.conn.Write(x.head); err != nil {
		return 0, err
	}
	in = x.inline
	if len(x.sent) > 0 {
		// An attempt over HTTP/2 that the backend refused read these
		// from the client (sendStream), which was asked to continue
		// then: they go first, framed as the head says.
		if err := x.writeKept(u); err != nil {
			return in, err
		}
		in += int64(len(x.sent))
	} else if x.Req.Expect100 && !x.streamed {
		if err := x.Door.Continue(); err != nil {
			return 0, errors.Join(errClientBody, err)
		}
	}
	if !x.bodySent() {
		x.streamed = true
	}
	n, rerr, werr := h1.CopyBody(u.conn, x.Body, x.Req.Chunked, x.trailHops)
	in += n
	if rerr != nil {
		return in, errors.Join(errClientBody, rerr)
	}
	return in, werr
}

// writeKept writes the body bytes kept in x.sent to u: as one chunk when
// the request is chunked, as they are under a Content-Length.
func (x *Exchange) writeKept(u *upstream) error {
	p := x.sent
	if x.Req.Chunked {
		p = h1.AppendChunkHeader(make([]byte, 0, len(x.sent)+24), len(x.sent))
		p = append(append(p, x.sent...), '\r', '\n')
	}
	_, err := u.conn.Write(p)
	return err
}

func (h *h1Session) readHead(x *Exchange, resp *h1.Response) error {
	return h.u.br.ReadResponse(resp, x.Req.IsMethod("HEAD"))
}

// lost: a connection closed or reset with no response byte read may
// have been closed by the backend while it idled in the pool.
func (h *h1Session) lost(err error) loss {
	if h.u.br.Buffered() == 0 && isConnLoss(err) {
		return lossConn
	}
	return lossUnknown
}

// reopen: a pooled connection lost before any response byte is replaced
// by a new one, once. A non-idempotent request passed the alive check in
// open, so a reused connection lost after sending it most likely
// delivered it: only requests that may be sent again get here.
func (h *h1Session) reopen(error) bool {
	h.stale = h.reused
	return h.stale
}

func (h *h1Session) tunnel() (net.Conn, []byte) {
	// Bytes that arrived behind the head belong to the new protocol.
	early := h.u.br.Peek()
	h.u.br.Discard(len(early))
	return h.u.conn.Conn, early
}

func (h *h1Session) body(x *Exchange, resp *h1.Response, drop []byte) {
	x.respBody.reset(h.u, resp, h.p.cfg().ResponseTimeout, x.Door, drop)
}

// finish: the body was sent before the response was read.
func (h *h1Session) finish(in int64) (int64, error) { return in, nil }

func (h *h1Session) trailerStatus(x *Exchange) string {
	return grpcStatusInLines(x.respBody.Trailers())
}

// reusable: the connection is at the end of both messages. Bytes already
// buffered after a complete response were sent unasked (a body on a HEAD
// answer, say): on reuse they would pass for the next request's
// response.
func (h *h1Session) reusable(x *Exchange, resp *h1.Response) bool {
	return !resp.Close && x.respBody.Done() && x.bodySent() && h.u.br.Buffered() == 0
}

func (h *h1Session) close(reuse bool) {
	if reuse {
		h.cs.put(h.u, h.at)
	} else {
		h.u.close()
	}
	h.u = nil
}
