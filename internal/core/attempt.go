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
	if len(x.chain.failed) > 0 {
		x.chain.attemptFailed(x, b, a.why(), time.Now())
	}
	return Outcome{}, false
}

// why says in a few words why an attempt that did not answer failed: how
// the backend failed, else relay's answer.
func (a *attempt) why() string {
	if a.fault != "" {
		return a.fault
	}
	return a.msg
}

// try sends x to b and relays the response, over the session of b's
// protocol. A session lost before the backend took the request may be
// replaced, and the request sent again (session.reopen). now is the time
// the attempt starts.
func (p *Pool) try(snap *snapshot, b *backend.Backend, x *Exchange, now time.Time) attempt {
	s := x.session(p, snap.conns[b], p.cfg().protocolOf(b))
	x.response = -1
	if x.Req.Upgrade {
		if why := s.upgrade(); why != "" {
			return attempt{verdict: failed, status: 502, msg: why, health: unjudged}
		}
	}
	for {
		if err := s.open(x, now); err != nil {
			return p.unreachable(b, x, err)
		}
		if !x.prepared {
			x.prepare(b)
		} else if x.Req.Host == nil {
			x.rehost(b)
		}
		a, end := p.exchange(b, s, x)
		s.close(end == reuseConn)
		if end != reopenConn {
			return a
		}
	}
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

// exchange sends the request over s and relays the response.
func (p *Pool) exchange(b *backend.Backend, s session, x *Exchange) (attempt, ending) {
	in, sent, err := s.send(x)
	if err != nil {
		if errors.Is(err, errClientBody) {
			// A body with broken framing or past the size limit gets its
			// error status, one too slow 408, and a client that went
			// away mid-body nothing. Either way the backend saw a cut-off
			// request: neither connection is reused, nothing is retried.
			o := p.core.bodyFailed(x, err, in)
			return attempt{status: o.Status, in: in, out: o.Out}, closeConn
		}
		// The head did not go out.
		return p.headFailed(s, x, err, 0, false)
	}
	req := x.Req
	resp := &x.resp
	interim := false // an informational response reached the client
	for {
		if err := s.readHead(x, resp); err != nil {
			in, berr := s.finish(in)
			if errors.Is(berr, errClientBody) && !errors.Is(err, errClientGone) {
				// The body's sender failed on the client's side.
				o := p.core.bodyFailed(x, berr, in)
				return attempt{status: o.Status, in: in, out: o.Out}, closeConn
			}
			return p.headFailed(s, x, err, in, interim)
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
			x.chain.interimHead(x, resp)
			if x.Door.Interim(resp) != nil {
				in, _ = s.finish(in)
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
		up, early := s.tunnel()
		out := x.Door.Tunnel(resp, up, early)
		return attempt{status: 101, in: in, out: out, health: served}, closeConn
	}
	// Read now: the body's bytes overwrite the head's.
	grpc, drop := p.judgeAnswer(x, resp)
	s.body(x, resp, drop)
	out, rerr, werr := x.Door.Respond(resp, &x.respBody)
	x.respBody.endFilter()
	in, _ = s.finish(in)
	a := attempt{status: resp.Status, in: in, out: out, health: served, grpc: grpc}
	if x.grpc && grpc == "" && rerr == nil && werr == nil {
		a.grpc = s.trailerStatus(x)
	}
	switch {
	case errors.Is(rerr, errClientGone):
		// The client went away while the backend was slow to send more:
		// nobody's fault that the backend must answer for.
		a.status, a.health = 499, unjudged
		return a, closeConn
	case errors.Is(rerr, errCallDeadline):
		// The call's deadline, as before the head: nobody's fault.
		a.health = unjudged
	case rerr != nil:
		// Too late for an error response: the front door cut the client
		// off so it sees a truncated message, not a complete wrong one.
		a.health, a.fault = faulted, "response body broken off: "+rerr.Error()
	}
	if rerr == nil && werr == nil && s.reusable(x, resp) {
		return a, reuseConn
	}
	return a, closeConn
}

// headFailed maps a failure to get a response head over s to an attempt.
// interim says an informational response reached the client.
func (p *Pool) headFailed(s session, x *Exchange, err error, in int64, interim bool) (attempt, ending) {
	a := attempt{verdict: failed, status: 502, msg: "backend sent no valid response", in: in,
		health: faulted, fault: "no valid response: " + err.Error()}
	switch {
	case errors.Is(err, errClientGone):
		// Cancelled: closing the connection tells the backend.
		return attempt{verdict: answered, status: 499, in: in}, closeConn
	case errors.Is(err, errCallDeadline):
		// The client's deadline: the backend is not to blame.
		a.status, a.msg, a.health, a.fault = 504, "the call's deadline passed", unjudged, ""
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The backend may still be working on it: never retry.
		a.status, a.msg, a.fault = 504, "backend did not answer in time", "no response in time"
	default:
		switch s.lost(err) {
		case lossRefused:
			// The backend did not process the request: another may,
			// whatever the method. A GOAWAY or a refused stream is the
			// backend shedding load or going away, not failing.
			a.msg, a.health, a.fault = "backend refused the request", unjudged, ""
			if x.replayable() {
				a.verdict = retry
			}
		case lossConn:
			if x.Req.Idempotent() && x.replayable() {
				a.verdict = retry
			}
		}
	}
	if a.verdict == retry && interim {
		// Bytes reached the client: the request is not sent again.
		a.verdict = failed
	}
	if a.verdict == retry && s.reopen(err) {
		return a, reopenConn
	}
	return a, closeConn
}

// answerHead makes b's final response head the client's: the response
// head phase of the request's chain (relay's request id, the sticky
// cookie, the route's header changes among them).
func (x *Exchange) answerHead(b *backend.Backend, resp *h1.Response) {
	x.respHops, x.answering = x.respHops[:0], b
	x.chain.responseHead(x, resp)
}

// judgeAnswer judges a half-open probe by the response head and returns
// what the body's relay needs of the head: the grpc-status it carries
// (a trailers-only answer's) and the fields kept out of its trailers.
func (p *Pool) judgeAnswer(x *Exchange, resp *h1.Response) (grpc string, drop []byte) {
	p.judgeHead(x, resp.Status)
	if x.grpc {
		grpc = grpcStatusOf(resp.Fields)
	}
	return grpc, x.respHops
}
