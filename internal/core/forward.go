package core

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"relay/internal/backend"
	"relay/internal/balance"
	"relay/internal/fds"
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
	health  health // what the backend's breaker makes of it
	fault   string // how the backend failed, when it did
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
//
// Picking passes by backends that cannot take the request now: a backend
// at its request limit, a half-open breaker whose probe is out, one warming
// up in slow start when others can take the request. When only limits
// stood in the way, the request waits in the pool's queue and picks again.
// When nothing else could take it, no backend is in rotation and the pool
// panics: it picks among every member an operator has not taken out,
// rather than answer 503 to requests a backend might still serve.
//
// now is the time the request reached the pool.
func (p *Pool) forward(x *Exchange, now time.Time) Outcome {
	snap, cfg := p.state.Load(), p.cfg()
	x.prepared, x.streamed, x.probe = false, false, nil
	var key uint64
	if cfg.alg.HashesClient {
		key = x.hashKey(p.core)
	}
	cfg.budget.request(cfg.budget.second(now))
	var tried, f balance.Filter // tried: backends tried; f: also those passed by
	last := attempt{status: 503, msg: "no backend available"}
	var lastB *backend.Backend
	var queuedUntil time.Time
	var seen uint64 // the queue's wake count before this round of picks
	if snap.limited {
		seen = p.queue.seq.Load()
	}
	tries, full := 0, false
	var end waitEnd              // how the last wait in the queue ended
	queued := false              // the request had its turn in the queue
	warming := cfg.SlowStart > 0 // pass by backends in slow start (slowstart.go)
	passedCold := false
	picks := 0 // since the last try, bounding the passes over a pool
	for tries <= cfg.Retries {
		var b *backend.Backend
		if picks < 2*balance.MaxAttempts {
			b = snap.picker.Pick(key, f)
			picks++
		}
		if b == nil {
			if passedCold {
				// Every backend left is warming: take one anyway.
				f, warming, passedCold, picks = tried, false, false, 0
				continue
			}
			if full {
				if end = p.await(x, &queuedUntil, queued, seen); end != recheck && !end.turn() {
					return p.unqueued(x, end)
				}
				// The pool may have changed while the request waited.
				snap, now, seen = p.state.Load(), time.Now(), p.queue.seq.Load()
				f, full, queued, picks = tried, false, end.turn(), 0
				continue
			}
			if tries == 0 && !f.Panic && len(snap.members) > 0 {
				// Nothing could take the request: no member is in
				// rotation, or the only ones are half-open with their
				// probe out.
				f, picks = tried, 0
				f.Panic = true
				p.enterPanic()
				continue
			}
			break
		}
		if warming && p.cold(b, key) {
			passBy(&f, &tried, b)
			passedCold = true
			continue
		}
		ok, probe, isFull := b.Admit(p.limit(b), !f.Panic)
		if !ok {
			passBy(&f, &tried, b)
			full = full || isFull
			continue
		}
		if end == ticked || end == chained {
			// A waiter found a place nobody announced: there may be
			// more for the next one.
			p.queue.wakeWith(true)
			end = woken
		}
		if tries > 0 {
			now = time.Now()
			if !cfg.budget.retry(cfg.budget.second(now)) {
				p.budgetRefusals.Add(1)
				p.release(snap, b, probe)
				last.msg += "; retry budget spent"
				break
			}
			p.retries.Add(1)
		}
		if probe {
			p.core.cfg.Logger.Log(context.Background(), p.breakerLevel(slog.LevelInfo), "circuit breaker half-open",
				"pool", cfg.Name, "backend", b.Name, "reason", "open time over: one probe request goes through")
			x.probe = b
		}
		if tries == 0 && !f.Panic {
			p.leavePanic()
		}
		tries, picks = tries+1, 0
		tried.Add(b)
		passBy(&f, &tried, b)
		a := p.try(snap, b, x, now)
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
		p.release(snap, b, false)
		if a.verdict == answered {
			return Outcome{Status: a.status, Backend: b, In: a.in, Out: a.out}
		}
		last, lastB = a, b
		if a.verdict == failed {
			break
		}
	}
	if f.Panic && last.status == 502 && last.health == faulted && last.msg == msgUnreachable {
		last.status, last.msg = 503, "no backend in rotation, and the ones tried are unreachable"
	}
	return p.fail(x, last, lastB)
}

// passBy adds b to f, the backends this request passed by or tried. When f
// can hold no more it starts again from tried, so that a backend the
// request was tried on is never picked again.
func passBy(f, tried *balance.Filter, b *backend.Backend) {
	if f.Tried() == balance.MaxAttempts {
		panicking := f.Panic
		*f = *tried
		f.Panic = panicking
	}
	f.Add(b)
}

// release ends a request's place on b, gives back its probe place if it
// held one unused, and wakes the longest waiter to take the place.
func (p *Pool) release(snap *snapshot, b *backend.Backend, probe bool) {
	if probe {
		b.EndProbe()
	}
	b.Release()
	if snap.limited {
		p.queue.wake()
	}
}

const msgUnreachable = "backend unreachable"

// limit is b's cap on requests in flight, 0 for none.
func (p *Pool) limit(b *backend.Backend) int64 {
	if n := b.MaxRequests(); n > 0 {
		return int64(n)
	}
	return int64(p.cfg().MaxRequests)
}

// await queues the request until a backend may have a place. *until is
// the request's queue deadline, set on its first wait; again says the
// request had its turn already and waits again at the front; seen is the
// queue's wake count read before the picks that found no place.
func (p *Pool) await(x *Exchange, until *time.Time, again bool, seen uint64) waitEnd {
	if until.IsZero() {
		*until = time.Now().Add(p.cfg().QueueTimeout)
	}
	end := p.queue.wait(*until, p.cfg().MaxQueued, again, seen, x.Door.Gone)
	if end.turn() && x.Door.Gone() {
		p.queue.wakeWith(end == chained) // the turn goes to the next waiter
		return clientGone
	}
	return end
}

// unqueued answers a request that left the queue without a place: 503
// when the queue was full or its time ran out, nothing to a client that
// went away (499).
func (p *Pool) unqueued(x *Exchange, end waitEnd) Outcome {
	switch end {
	case queueFull:
		return p.fail(x, attempt{status: 503, msg: "every backend is at its request limit and the queue is full"}, nil)
	case timedOut:
		return p.fail(x, attempt{status: 503, msg: "every backend is at its request limit: queue timeout"}, nil)
	}
	return Outcome{Status: 499}
}

// enterPanic notes that the pool has no backend in rotation and balances
// over every member; the first request to find it so logs it.
func (p *Pool) enterPanic() {
	if !p.panicking.Load() && p.panicking.CompareAndSwap(false, true) {
		p.core.cfg.Logger.Warn("no backend in rotation: balancing over all of them", "pool", p.cfg().Name)
	}
}

// leavePanic notes that a backend is in rotation again.
func (p *Pool) leavePanic() {
	if p.panicking.Load() && p.panicking.CompareAndSwap(true, false) {
		p.core.cfg.Logger.Info("a backend is back in rotation: panic over", "pool", p.cfg().Name)
	}
}

// fail answers the client with relay's own error for the last attempt.
func (p *Pool) fail(x *Exchange, a attempt, b *backend.Backend) Outcome {
	n, _ := x.Door.Error(a.status, a.msg)
	return Outcome{Status: a.status, Backend: b, In: a.in, Out: n}
}

// try sends x to b and relays the response. A reused pooled connection
// that turns out to be closed is replaced by a fresh one once, when the
// request can be sent again. now is the time the attempt starts.
func (p *Pool) try(snap *snapshot, b *backend.Backend, x *Exchange, now time.Time) attempt {
	cs := snap.conns[b]
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
	a := attempt{verdict: failed, status: 502, msg: msgUnreachable, health: faulted, fault: "unreachable: " + err.Error()}
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
	if len(x.rid) > 0 {
		x.answerWithID(resp)
	}
	if x.respOps != nil {
		resp.Fields = x.respOps.apply(resp.Fields)
	}
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
	p.judgeHead(x, resp.Status)
	x.respBody.reset(u, resp, p.cfg().ResponseTimeout, x.Door)
	out, rerr, werr := x.Door.Respond(resp, &x.respBody)
	a := attempt{status: resp.Status, in: in, out: out, health: served}
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
