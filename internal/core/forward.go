package core

import (
	"time"

	"relay/internal/backend"
	"relay/internal/balance"
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
	// unreached says the backend could not be reached: no connection
	// (a failed TLS handshake did reach it), nothing sent.
	unreached bool
	// exhausted says relay refused the request for want of room (every
	// backend at its cap), which a gRPC client reads as
	// RESOURCE_EXHAUSTED (grpc.go).
	exhausted bool
	// grpc is the grpc-status the backend's response ended with, "" for
	// none (grpc.go).
	grpc string
}

// Relay's own answers when no backend answered.
const (
	msgUnreachable = "backend unreachable"
	// msgNoBackend: nothing could be tried, the pool has no member an
	// operator has left in service.
	msgNoBackend = "no backend available"
	// msgNoneUp: every backend the request was sent to was unreachable,
	// and no other may be up (passage.noneUp).
	msgNoneUp = "no backend is up: every one tried is unreachable"
	// budgetSpent ends the message of a request refused a retry.
	budgetSpent = "; retry budget spent"
)

// forward sends x to the pool's backends until one answers or retrying is
// no longer safe, then answers the client if no backend did. now is the
// time the request reached the pool.
//
// It takes three steps, again while the request may be retried:
//
//	pick     choose a backend and take a place on it (passage.pick):
//	         backends that cannot take the request now are passed by,
//	         and with none in rotation the pool panics
//	wait     when only request limits stood in the way, wait in the
//	         pool's queue and pick again (passage.wait)
//	attempt  ask the retry budget (retries only), send the request,
//	         judge the outcome on the backend's breaker, give the place
//	         back (passage.attempt)
//
// and answers with relay's own error when no backend answered
// (passage.fail).
func (p *Pool) forward(x *Exchange, now time.Time) Outcome {
	var r passage
	r.start(p, x, now)
	for r.tries <= r.cfg.Retries {
		b, probe := r.pick()
		if b == nil {
			if !r.full {
				break
			}
			if !r.wait() {
				return r.unqueued()
			}
			continue
		}
		if o, done := r.attempt(b, probe); done {
			return o
		}
		if r.last.verdict == failed || r.refused {
			break
		}
	}
	return r.fail()
}

// passage is one request's way through a pool: what the steps of forward
// share. It lives on forward's stack and is not shared.
type passage struct {
	p    *Pool
	x    *Exchange
	snap *snapshot // the members as the request last saw them
	cfg  *settings // the pool's settings as the request began
	now  time.Time // arrival, or the start of the last wait or attempt
	key  uint64    // the client's hash, when the algorithm hashes clients

	// Picking. tried holds the backends the request was sent to; f also
	// those passed by since the last attempt or wait, so the next pick
	// skips them. Both carry Panic once the pool panics.
	tried, f   balance.Filter
	picks      int  // Pick calls since the last attempt or wait: bounds the passes over a pool
	warming    bool // pass by backends in slow start (slowstart.go)
	passedCold bool // a backend warming up was passed by
	full       bool // a backend was passed by at its request limit: waiting may help

	// Waiting (wait.go).
	seen  uint64    // the queue's wake count before this round of picks
	until time.Time // the queue deadline, set on the first wait
	end   waitEnd   // how the last wait ended
	turn  bool      // the request had its turn in the queue: it waits again at the front

	// Attempts.
	tries   int              // attempts made
	last    attempt          // the last attempt's result, for relay's answer
	lastB   *backend.Backend // the backend of the last attempt
	reached bool             // some attempt reached a backend
	refused bool             // the retry budget refused a retry
}

// start readies r for x arriving at p at now.
func (r *passage) start(p *Pool, x *Exchange, now time.Time) {
	r.p, r.x, r.now = p, x, now
	r.snap, r.cfg = p.state.Load(), p.cfg()
	x.prepared, x.streamed, x.probe = false, false, nil
	x.grpc, x.deadline, x.sent = x.grpcRequest(), time.Time{}, x.sent[:0]
	if x.grpc {
		x.deadline = x.callDeadline(now, r.cfg.MaxGRPCTimeout)
	}
	if r.cfg.alg.HashesClient {
		r.key = x.hashKey(p.core, r.cfg.HashKey)
	}
	r.cfg.budget.request(r.cfg.budget.second(now))
	r.warming = r.cfg.SlowStart > 0
	if r.snap.limited {
		r.seen = p.queue.seq.Load()
	}
	r.last = attempt{status: 503, msg: msgNoBackend}
}

// fail answers the client with relay's own error once no backend answered.
// A request that reached no backend, when no other may be up, gets 503
// "no backend is up" (noneUp), whatever stopped it: no backend left, the
// retries or the budget spent; otherwise the last attempt's error, saying
// so when the budget refused a retry.
func (r *passage) fail() Outcome {
	a := r.last
	switch {
	case r.noneUp():
		a.status, a.msg = 503, msgNoneUp
	case r.refused:
		a.msg += budgetSpent
	}
	o := r.p.fail(r.x, a, r.lastB)
	o.Retries = max(r.tries-1, 0)
	return o
}

// noneUp reports whether the request found no backend up: every backend it
// was sent to was unreachable, and no other in rotation may be up. That is
// when the pool has none in rotation (it panicked and tried the others),
// and when each member in rotation that the request did not try is in a
// run of failures its breaker has not acted on yet (all backends just
// died, and retries or the budget stopped the request before it tried
// them all). A backend in rotation whose last request went well, left
// untried, means relay cannot say none is up: the last error stands.
func (r *passage) noneUp() bool {
	if r.tries == 0 || r.reached {
		return false
	}
	if r.tried.Panic {
		return true
	}
	for _, b := range r.snap.members {
		if r.tried.Allows(b) && b.ConsecutiveFailures() == 0 {
			return false
		}
	}
	return true
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

// limit is b's cap on requests in flight, 0 for none.
func (p *Pool) limit(b *backend.Backend) int64 {
	if n := b.MaxRequests(); n > 0 {
		return int64(n)
	}
	return int64(p.cfg().MaxRequests)
}

// fail answers the client with relay's own error for attempt a.
func (p *Pool) fail(x *Exchange, a attempt, b *backend.Backend) Outcome {
	o := x.answerError(a.status, a.msg, a.exhausted)
	o.Backend, o.In = b, a.in
	return o
}
