package proxy

import (
	"errors"
	"os"
	"time"

	"relay/internal/backend"
	"relay/internal/h1"
	"relay/internal/logging"
)

// handle serves the request in cc.req and reports whether the client
// connection stays open for another.
func (cc *clientConn) handle() bool {
	p := cc.p
	var start time.Time
	n := len(cc.req.Method)
	if p.cfg.AccessLog != nil {
		start = time.Now()
		// The head's bytes are overwritten once body bytes are read.
		cc.logLine = append(append(cc.logLine[:0], cc.req.Method...), cc.req.Target...)
	}
	keep := !cc.req.Close && !p.srv.stopping.Load()
	o := cc.forward(keep)
	if p.cfg.AccessLog != nil {
		e := logging.Entry{
			Time: start, Client: cc.peer, Method: cc.logLine[:n], Path: cc.logLine[n:],
			Status: o.status, Duration: time.Since(start), BytesIn: o.in, BytesOut: o.out,
		}
		if o.b != nil {
			e.Backend = o.b.Name
		}
		p.cfg.AccessLog.Log(&e)
	}
	return o.keep
}

// outcome is what became of one request.
type outcome struct {
	status  int
	b       *backend.Backend
	in, out int64 // body bytes received from the client and sent to it
	keep    bool  // the client connection stays open
}

// forward picks backends and tries the request on them until one answers or
// retrying is no longer safe, then answers the client.
func (cc *clientConn) forward(keep bool) outcome {
	snap := cc.p.state.Load()
	cc.prepared, cc.streamed = false, false
	cc.reqBody.Reset(cc.br, h1.BodyNone, 0)
	var key uint64
	if snap.hashKey {
		key = cc.hashKey()
	}
	var tried [8]*backend.Backend
	n := 0
	attempts := 1 + cc.p.cfg.Retries
	var last attempt
	for i := 0; i < attempts; i++ {
		b := snap.pick(key, tried[:n])
		if b == nil {
			break
		}
		if n < len(tried) {
			tried[n] = b
			n++
		}
		a := cc.try(snap, b, keep)
		if a.done || !a.retry {
			a.outcome.b = b
			if !a.done {
				return cc.fail(a)
			}
			return a.outcome
		}
		last = a
		last.outcome.b = b
	}
	if n == 0 {
		return cc.fail(attempt{outcome: outcome{status: 503, keep: keep && !cc.req.HasBody()}, msg: "no healthy backend"})
	}
	return cc.fail(last)
}

// attempt is the result of trying a request on one backend.
type attempt struct {
	outcome
	done  bool   // the client got the backend's response (or went away)
	retry bool   // the request may be tried on another backend
	msg   string // why it failed, for the error response
}

// fail answers the client with relay's own error for a failed attempt.
func (cc *clientConn) fail(a attempt) outcome {
	o := a.outcome
	if o.status == 0 {
		o.status = 502
	}
	// Unread request body bytes would be taken for the next request.
	o.keep = o.keep && cc.bodyRead()
	if err := cc.writeError(o.status, a.msg, !o.keep); err != nil {
		o.keep = false
	}
	return o
}

// try sends the request to b and relays the response. A reused pooled
// connection that turns out to be closed is replaced by a fresh one once,
// when the request can be sent again.
func (cc *clientConn) try(snap *snapshot, b *backend.Backend, keep bool) attempt {
	pl := snap.pools[b]
	b.Acquire()
	defer b.Release()
	now := time.Now()
	u, reused, err := pl.get(now)
	if err != nil {
		return cc.unreachable(b, err, keep)
	}
	if reused && !cc.req.Idempotent() && !u.alive() {
		// A request that cannot be sent twice must not go out on a
		// connection the backend has already closed.
		u.conn.Close()
		if u, err = pl.dial(); err != nil {
			return cc.unreachable(b, err, keep)
		}
		reused = false
	}
	if !cc.prepared {
		cc.prepareRequest(b)
	}
	a := cc.exchange(u, keep, now)
	// A non-idempotent request passed the alive check above, so a reused
	// connection lost after sending it most likely delivered it: only
	// idempotent requests are sent again.
	if a.stale && reused && cc.req.Idempotent() && cc.replayable() {
		u.conn.Close()
		if u, err = pl.dial(); err != nil {
			return cc.unreachable(b, err, keep)
		}
		a = cc.exchange(u, keep, time.Now())
	}
	if a.failed {
		b.Fail()
	}
	if a.reuse {
		pl.put(u, now)
	} else {
		u.conn.Close()
	}
	return a.attempt
}

// unreachable records a failed dial to b. Nothing was sent, so the request
// may go to another backend if its body can still be sent.
func (cc *clientConn) unreachable(b *backend.Backend, err error, keep bool) attempt {
	b.Fail()
	cc.p.cfg.Logger.Warn("backend unreachable", "backend", b.Name, "err", err)
	return attempt{outcome: outcome{status: 502, keep: keep}, retry: cc.replayable(), msg: "backend unreachable"}
}

// exchangeResult adds to attempt what try needs to manage the connection.
type exchangeResult struct {
	attempt
	stale  bool // failed before any response byte: the connection may have been closed while idle
	failed bool // count a failure against the backend
	reuse  bool // the upstream connection can go back to the pool
}

// replayable reports whether the request can be sent again: nothing of its
// body has been streamed from the client yet, so every byte sent so far is
// still held in cc.reqOut.
func (cc *clientConn) replayable() bool { return !cc.streamed }

// bodyRead reports whether the request body has been read to its end, so
// the client connection is positioned at the next request.
func (cc *clientConn) bodyRead() bool {
	if !cc.prepared {
		return !cc.req.HasBody()
	}
	return cc.reqBody.Done()
}

// exchange writes the request on u and relays the response.
func (cc *clientConn) exchange(u *upstream, keep bool, now time.Time) exchangeResult {
	req := &cc.req
	u.conn.SetReadDeadline(now.Add(cc.p.cfg.ResponseTimeout))
	in, err := cc.sendRequest(u)
	if err != nil {
		if errors.Is(err, errClientBody) {
			// A body with broken framing gets its error status; a client
			// that went away mid-body has nobody left to answer. Either
			// way the backend saw a cut-off request: neither connection
			// is reused.
			var he *h1.Error
			if errors.As(err, &he) {
				cc.writeError(he.Status, he.Msg, true)
				return exchangeResult{attempt: attempt{outcome: outcome{status: he.Status, in: in}, done: true}}
			}
			return exchangeResult{attempt: attempt{outcome: outcome{status: 400, in: in}, done: true}}
		}
		// The backend stopped reading: it may still have answered, so
		// read on; reading reports the failure if not.
		cc.p.cfg.Logger.Debug("request write failed", "err", err)
	}
	isHead := req.IsMethod("HEAD")
	for {
		err = u.br.ReadResponse(&cc.resp, isHead)
		if err != nil {
			return cc.responseFailed(err, u, keep, in)
		}
		if cc.resp.Status >= 200 || cc.resp.Status == 101 {
			break
		}
		// Informational responses (103 Early Hints and the like) pass on
		// to HTTP/1.1 clients; 100 Continue was answered by relay itself.
		if cc.resp.Status != 100 && req.Minor == 1 {
			cc.out = h1.AppendStatusLine(cc.out[:0], cc.resp.Status, cc.resp.Reason)
			cc.out = h1.AppendForwardFields(cc.out, cc.resp.Fields)
			cc.out = append(cc.out, '\r', '\n')
			if _, err := cc.conn.Write(cc.out); err != nil {
				return exchangeResult{attempt: attempt{outcome: outcome{status: 499, in: in}, done: true}}
			}
		}
	}
	if cc.resp.Status == 101 {
		if !req.Upgrade {
			return exchangeResult{attempt: attempt{outcome: outcome{status: 502, keep: keep, in: in}, msg: "backend switched protocols unasked"}, failed: true}
		}
		out := cc.upgrade(u)
		return exchangeResult{attempt: attempt{outcome: outcome{status: 101, in: in, out: out}, done: true}}
	}
	return cc.relayResponse(u, keep, in)
}

// responseFailed maps a failure to read the response head to an outcome.
func (cc *clientConn) responseFailed(err error, u *upstream, keep bool, in int64) exchangeResult {
	r := exchangeResult{failed: true}
	r.outcome = outcome{status: 502, keep: keep, in: in}
	r.msg = "backend sent no valid response"
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The backend may still be working on it: never retry.
		r.status, r.msg = 504, "backend did not answer in time"
	case u.br.Buffered() == 0 && isConnLoss(err):
		r.stale = true
		r.retry = cc.req.Idempotent() && cc.replayable()
	}
	return r
}

// relayResponse writes the response head from cc.resp to the client and
// streams its body.
func (cc *clientConn) relayResponse(u *upstream, keep bool, in int64) exchangeResult {
	req, resp := &cc.req, &cc.resp
	r := exchangeResult{}
	r.done = true
	r.status, r.in = resp.Status, in
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
		if req.Minor == 1 {
			out = append(out, "Transfer-Encoding: chunked\r\n"...)
			chunked = true
		} else {
			keep = false // the end of the body is the end of the connection
		}
	}
	// Request body bytes the backend did not read would be taken for the
	// next request; a draining server tells clients to go elsewhere.
	keep = keep && cc.bodyRead() && !cc.p.srv.stopping.Load()
	if !keep {
		out = append(out, "Connection: close\r\n"...)
	} else if req.Minor == 0 {
		out = append(out, "Connection: keep-alive\r\n"...)
	}
	out = append(out, '\r', '\n')
	cc.upBody.Reset(u.br, resp.Body, resp.ContentLength)
	if resp.Body == h1.BodyLength {
		// Send what already arrived with the head in the same write.
		k := int64(u.br.Buffered())
		if k > resp.ContentLength {
			k = resp.ContentLength
		}
		out = append(out, u.br.Peek()[:k]...)
		u.br.Discard(int(k))
		r.out = k
		cc.upBody.Reset(u.br, h1.BodyLength, resp.ContentLength-k)
	}
	cc.out = out
	if _, err := cc.conn.Write(out); err != nil {
		r.keep = false
		return r
	}
	if !cc.upBody.Done() {
		n, rerr, werr := pump(cc.conn, &cc.upBody, u.conn, chunked, cc.p.cfg.ResponseTimeout)
		r.out += n
		if rerr != nil || werr != nil {
			// Too late for an error response: cut the client off so it
			// sees a truncated message, not a complete wrong one.
			r.failed = rerr != nil
			r.keep = false
			return r
		}
	}
	r.keep = keep
	// Bytes already buffered after a complete response were sent unasked
	// (a body on a HEAD answer, say): on reuse they would pass for the
	// next request's response.
	r.reuse = !resp.Close && cc.upBody.Done() && cc.bodyRead() && u.br.Buffered() == 0
	return r
}
