package core

import (
	"errors"
	"os"
	"time"

	"relay/internal/backend"
	"relay/internal/balance"
	"relay/internal/h1"
)

// verdict is what an attempt on one backend came to.
type verdict uint8

const (
	// answered: the client got the backend's response, or relay's answer
	// to a broken request body, or went away. Nothing more to do.
	answered verdict = iota
	// retry: nothing reached the client and the request may go to another
	// backend.
	retry
	// failed: nothing reached the client and the request must not go
	// elsewhere; relay answers with its own error.
	failed
)

// attempt is the result of trying a request on one backend.
type attempt struct {
	verdict verdict
	status  int    // the client's status; relay's error status unless answered
	msg     string // why it failed, for relay's error response
	in, out int64  // body bytes sent to the backend and to the client
}

// ending is what becomes of an upstream connection after an exchange.
type ending uint8

const (
	closeConn ending = iota // close it
	reuseConn               // the response was read to its end: pool it
	staleConn               // lost before any response byte: it may have been closed while idle
)

// forward picks backends and tries x on them until one answers or retrying
// is no longer safe, then answers the client if the backend did not.
func (p *Pool) forward(x *Exchange) Outcome {
	snap := p.state.Load()
	x.prepared, x.streamed = false, false
	var key uint64
	if p.alg.HashesClient {
		key = x.hashKey(p.core)
	}
	var f balance.Filter
	last := attempt{status: 503, msg: "no healthy backend"}
	var lastB *backend.Backend
	for range 1 + p.cfg.Retries {
		b := snap.picker.Pick(key, f)
		if b == nil {
			break
		}
		f.Add(b)
		a := p.try(snap, b, x)
		if a.verdict == answered {
			return Outcome{Status: a.status, Backend: b, In: a.in, Out: a.out}
		}
		last, lastB = a, b
		if a.verdict == failed {
			break
		}
	}
	return p.fail(x, last, lastB)
}

// fail answers the client with relay's own error for the last attempt.
func (p *Pool) fail(x *Exchange, a attempt, b *backend.Backend) Outcome {
	x.Door.Error(a.status, a.msg)
	return Outcome{Status: a.status, Backend: b, In: a.in}
}

// try sends x to b and relays the response. A reused pooled connection
// that turns out to be closed is replaced by a fresh one once, when the
// request can be sent again.
func (p *Pool) try(snap *snapshot, b *backend.Backend, x *Exchange) attempt {
	cs := snap.conns[b]
	b.Acquire()
	defer b.Release()
	now := time.Now()
	u, reused, err := cs.get(now)
	if err != nil {
		return p.unreachable(b, x, err)
	}
	idempotent := x.Req.Idempotent()
	if reused && !idempotent && !u.alive() {
		// A request that cannot be sent twice must not go out on a
		// connection the backend has already closed.
		u.conn.Close()
		if u, err = cs.dial(); err != nil {
			return p.unreachable(b, x, err)
		}
		reused = false
	}
	if !x.prepared {
		x.prepare(p.core, b)
	}
	a, end := p.exchange(b, u, x, now)
	// A non-idempotent request passed the alive check above, so a reused
	// connection lost after sending it most likely delivered it: only
	// idempotent requests are sent again.
	if end == staleConn && reused && idempotent && x.replayable() {
		u.conn.Close()
		if u, err = cs.dial(); err != nil {
			return p.unreachable(b, x, err)
		}
		a, end = p.exchange(b, u, x, time.Now())
	}
	if end == staleConn {
		b.Fail() // counted once, after any transparent replacement
	}
	if end == reuseConn {
		cs.put(u, now)
	} else {
		u.conn.Close()
	}
	return a
}

// unreachable records a failed dial to b. Nothing was sent, so the request
// may go to another backend if its body can still be sent.
func (p *Pool) unreachable(b *backend.Backend, x *Exchange, err error) attempt {
	b.Fail()
	p.core.cfg.Logger.Warn("backend unreachable", "backend", b.Name, "err", err)
	a := attempt{verdict: failed, status: 502, msg: "backend unreachable"}
	if x.replayable() {
		a.verdict = retry
	}
	return a
}

// exchange writes the request on u and relays the response.
func (p *Pool) exchange(b *backend.Backend, u *upstream, x *Exchange, now time.Time) (attempt, ending) {
	req := x.Req
	u.conn.SetReadDeadline(now.Add(p.cfg.ResponseTimeout))
	in, err := x.send(u)
	if err != nil {
		if errors.Is(err, errClientBody) {
			// A body with broken framing gets its error status; a client
			// that went away mid-body has nobody left to answer. Either
			// way the backend saw a cut-off request: neither connection
			// is reused.
			var he *h1.Error
			if errors.As(err, &he) {
				x.Door.Error(he.Status, he.Msg)
				return attempt{status: he.Status, in: in}, closeConn
			}
			return attempt{status: 400, in: in}, closeConn
		}
		// The backend stopped reading: it may still have answered, so
		// read on; reading reports the failure if not.
		p.core.cfg.Logger.Debug("request write failed", "err", err)
	}
	isHead := req.IsMethod("HEAD")
	resp := &x.resp
	for {
		if err := u.br.ReadResponse(resp, isHead); err != nil {
			return p.responseFailed(b, u, x, err, in)
		}
		if resp.Status >= 200 || resp.Status == 101 {
			break
		}
		// 100 Continue was answered by relay itself; other informational
		// responses (103 Early Hints) pass on.
		if resp.Status != 100 {
			if x.Door.Interim(resp) != nil {
				return attempt{status: 499, in: in}, closeConn
			}
		}
	}
	if resp.Status == 101 {
		if !req.Upgrade {
			b.Fail()
			return attempt{verdict: failed, status: 502, msg: "backend switched protocols unasked", in: in}, closeConn
		}
		// Bytes that arrived behind the head belong to the new protocol.
		early := u.br.Peek()
		u.br.Discard(len(early))
		out := x.Door.Tunnel(resp, u.conn.Conn, early)
		return attempt{status: 101, in: in, out: out}, closeConn
	}
	x.respBody.reset(u, resp, p.cfg.ResponseTimeout)
	out, rerr, werr := x.Door.Respond(resp, &x.respBody)
	a := attempt{status: resp.Status, in: in, out: out}
	if rerr != nil {
		// Too late for an error response: the front door cut the client
		// off so it sees a truncated message, not a complete wrong one.
		b.Fail()
	}
	// Bytes already buffered after a complete response were sent unasked
	// (a body on a HEAD answer, say): on reuse they would pass for the
	// next request's response.
	if rerr == nil && werr == nil && !resp.Close && x.respBody.Done() && x.bodySent() && u.br.Buffered() == 0 {
		return a, reuseConn
	}
	return a, closeConn
}

// responseFailed maps a failure to read the response head to an attempt.
func (p *Pool) responseFailed(b *backend.Backend, u *upstream, x *Exchange, err error, in int64) (attempt, ending) {
	a := attempt{verdict: failed, status: 502, msg: "backend sent no valid response", in: in}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The backend may still be working on it: never retry.
		a.status, a.msg = 504, "backend did not answer in time"
	case u.br.Buffered() == 0 && isConnLoss(err):
		if x.Req.Idempotent() && x.replayable() {
			a.verdict = retry
		}
		return a, staleConn // try counts the failure
	}
	b.Fail()
	return a, closeConn
}
