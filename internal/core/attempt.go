package core

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"relay/internal/backend"
	"relay/internal/fds"
	"relay/internal/h1"
)

// attempt sends the request to b, where pick took a place for it (b's
// half-open probe place when probe), judges the outcome on b's breaker
// and gives the place back. A retry first asks the pool's retry budget;
// one refused gives the place back unused and sets r.refused. It returns
// the request's outcome and true when a backend answered; otherwise the
// attempt is in r.last and the request may be retried unless it failed.
func (r *passage) attempt(b *backend.Backend, probe bool) (Outcome, bool) {
	p, x := r.p, r.x
	r.passOn()
	grant := freeRetry
	if r.tries > 0 {
		r.now = time.Now()
		if grant = r.cfg.budget.retry(r.cfg.budget.second(r.now)); grant == noRetry {
			p.budgetRefusals.Add(1)
			p.release(r.snap, b, probe)
			r.refused = true
			return Outcome{}, false
		}
		p.retries.Add(1)
	}
	if probe {
		p.core.cfg.Logger.Log(context.Background(), p.breakerLevel(slog.LevelInfo), "circuit breaker half-open",
			"pool", r.cfg.Name, "backend", b.Name, "reason", "open time over: one probe request goes through")
		x.probe = b
	}
	if r.tries == 0 && !r.tried.Panic {
		p.leavePanic()
	}
	r.tries, r.picks = r.tries+1, 0
	r.tried.Add(b)
	r.passBy(b)
	a := p.try(r.snap, b, x, r.now)
	switch {
	case !probe:
		p.judge(b, false, &a)
	case x.probe != nil:
		// No response head came to judge the probe by.
		x.probe = nil
		p.judge(b, true, &a)
	case a.health == faulted:
		// The head judged the probe; then the body broke off.
		p.judge(b, false, &a)
	}
	// The verdict is in before a waiter is woken to pick.
	p.release(r.snap, b, false)
	r.reached = r.reached || !a.unreached
	if a.verdict == answered {
		if a.health == served && !r.cfg.counts(&a) {
			// A retry a backend answered gave the client what it
			// asked for: the budget bounds retries that fail.
			r.cfg.budget.refund(r.cfg.budget.second(r.now), grant)
		}
		return Outcome{Status: a.status, Backend: b, In: a.in, Out: a.out, GRPCStatus: a.grpc, Retries: r.tries - 1}, true
	}
	r.last, r.lastB = a, b
	return Outcome{}, false
}

// try sends x to b and relays the response. A reused pooled connection
// that turns out to be closed is replaced by a fresh one once, when the
// request can be sent again. now is the time the attempt starts.
func (p *Pool) try(snap *snapshot, b *backend.Backend, x *Exchange, now time.Time) attempt {
	cs := snap.conns[b]
	if proto := p.cfg().protocolOf(b); proto != HTTP1 {
		return p.tryStream(cs, b, x, now, proto)
	}
	x.response = -1
	u, reused, err := cs.get(now)
	if x.timed {
		// A pooled connection took no time to get: 0, without reading
		// the clock. A dial is timed from the attempt's start.
		x.connect = 0
		if !reused {
			x.connect = time.Since(now)
		}
	}
	if err != nil {
		return p.unreachable(b, x, err)
	}
	idempotent := x.Req.Idempotent()
	if reused && !idempotent && !u.alive() {
		// A request that cannot be sent twice must not go out on a
		// connection the backend has already closed.
		u.close()
		if u, err = x.dial(cs); err != nil {
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
		u.close()
		if u, err = x.dial(cs); err != nil {
			return p.unreachable(b, x, err)
		}
		a, end = p.exchange(b, u, x, time.Now())
	}
	if end == reuseConn {
		cs.put(u, now)
	} else {
		u.close()
	}
	return a
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

// unreachable records a failed dial to b. Nothing was sent, so the request
// may go to another backend if its body can still be sent.
func (p *Pool) unreachable(b *backend.Backend, x *Exchange, err error) attempt {
	if fds.IsExhaustion(err) {
		// relay's own shortage: the backend is not to blame, and another
		// backend would need a descriptor too.
		p.core.ShortOfDescriptors(err)
		return attempt{verdict: failed, status: 503, msg: fds.ErrSpent.Error(), health: unjudged}
	}
	p.core.cfg.Logger.Warn("backend unreachable", "backend", b.Name, "err", err)
	a := attempt{verdict: failed, status: 502, msg: msgUnreachable, health: faulted, fault: "unreachable: " + err.Error(),
		unreached: !errors.Is(err, errHandshake)}
	if x.replayable() {
		a.verdict = retry
	}
	return a
}

// exchange writes the request on u and relays the response.
func (p *Pool) exchange(b *backend.Backend, u *upstream, x *Exchange, now time.Time) (attempt, ending) {
	req := x.Req
	u.wait(now, p.cfg().ResponseTimeout, x.Door)
	in, err := x.send(u)
	var sent time.Time // when the request was sent, for the access log
	if x.streamed {
		// The wait for the answer starts once the body is sent: an
		// upload may take longer than response_timeout.
		sent = time.Now()
		u.wait(sent, p.cfg().ResponseTimeout, x.Door)
	} else if x.timed {
		// A request whose head and body are in x.head goes out with
		// the first read of the response.
		sent = time.Now()
	}
	if err != nil {
		if errors.Is(err, errClientBody) {
			// A body with broken framing or past the size limit gets its
			// error status, one too slow 408, and a client that went
			// away mid-body nothing. Either way the backend saw a cut-off
			// request: neither connection is reused, nothing is retried.
			o := p.core.bodyFailed(x, err, in)
			return attempt{status: o.Status, in: in, out: o.Out}, closeConn
		}
		// The backend stopped reading: it may still have answered, so
		// read on; reading reports the failure if not.
		p.core.cfg.Logger.Debug("request write failed", "err", err)
	}
	isHead := req.IsMethod("HEAD")
	resp := &x.resp
	interim := false // an informational response reached the client
	for {
		if err := u.br.ReadResponse(resp, isHead); err != nil {
			a, end := p.responseFailed(u, x, err, in)
			if interim && a.verdict == retry {
				// Bytes reached the client: the request is not sent again.
				a.verdict, end = failed, closeConn
			}
			return a, end
		}
		if resp.Status >= 200 || resp.Status == 101 {
			if x.timed {
				x.response = time.Since(sent)
			}
			break
		}
		// 100 Continue was answered by relay itself; other informational
		// responses (103 Early Hints) pass on.
		if resp.Status != 100 {
			if len(x.rid) > 0 {
				// An interim response names the request by relay's id
				// too, never by one the backend made up.
				x.answerWithID(resp)
			}
			if x.Door.Interim(resp) != nil {
				return attempt{status: 499, in: in}, closeConn
			}
			interim = true
		}
	}
	x.answerHead(b, resp)
	if resp.Status == 101 {
		if !req.Upgrade {
			return attempt{verdict: failed, status: 502, msg: "backend switched protocols unasked", in: in,
				health: faulted, fault: "switched protocols unasked"}, closeConn
		}
		p.judgeHead(x, 101)
		// Bytes that arrived behind the head belong to the new protocol.
		early := u.br.Peek()
		u.br.Discard(len(early))
		out := x.Door.Tunnel(resp, u.conn.Conn, early)
		return attempt{status: 101, in: in, out: out, health: served}, closeConn
	}
	// Read now: the body's bytes overwrite the head's.
	grpc, drop := p.judgeAnswer(x, resp)
	x.respBody.reset(u, resp, p.cfg().ResponseTimeout, x.Door, drop)
	out, rerr, werr := x.Door.Respond(resp, &x.respBody)
	x.respBody.endFilter()
	a := attempt{status: resp.Status, in: in, out: out, health: served, grpc: grpc}
	if x.grpc && grpc == "" && rerr == nil && werr == nil {
		a.grpc = grpcStatusInLines(x.respBody.Trailers())
	}
	if errors.Is(rerr, errClientGone) {
		// The client went away while the backend was slow to send more:
		// nobody's fault that the backend must answer for.
		a.status, a.health = 499, unjudged
		return a, closeConn
	}
	if rerr != nil {
		// Too late for an error response: the front door cut the client
		// off so it sees a truncated message, not a complete wrong one.
		a.health, a.fault = faulted, "response body broken off: "+rerr.Error()
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
func (p *Pool) responseFailed(u *upstream, x *Exchange, err error, in int64) (attempt, ending) {
	a := attempt{verdict: failed, status: 502, msg: "backend sent no valid response", in: in,
		health: faulted, fault: "no valid response: " + err.Error()}
	switch {
	case errors.Is(err, errClientGone):
		// Cancelled: closing the connection tells the backend.
		return attempt{verdict: answered, status: 499, in: in}, closeConn
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The backend may still be working on it: never retry.
		a.status, a.msg, a.fault = 504, "backend did not answer in time", "no response in time"
	case u.br.Buffered() == 0 && isConnLoss(err):
		if x.Req.Idempotent() && x.replayable() {
			a.verdict = retry
		}
		return a, staleConn
	}
	return a, closeConn
}

// answerHead makes a backend's final response head the client's: the
// response head phase of the request's chain (relay's request id among
// them), the route's header changes, the sticky cookie.
func (x *Exchange) answerHead(b *backend.Backend, resp *h1.Response) {
	x.chain.responseHead(x, resp)
	if x.respOps != nil {
		resp.Fields = x.respOps.apply(resp.Fields)
	}
	x.stickyAnswer(b, resp)
}

// judgeAnswer judges a half-open probe by the response head and returns
// what the body's relay needs of the head: the grpc-status it carries
// (a trailers-only answer's) and the fields the route removes.
func (p *Pool) judgeAnswer(x *Exchange, resp *h1.Response) (grpc string, drop []byte) {
	p.judgeHead(x, resp.Status)
	if x.grpc {
		grpc = grpcStatusOf(resp.Fields)
	}
	if x.respOps != nil {
		drop = x.respOps.names
	}
	return grpc, drop
}
