package core

import "time"

// wait queues the request after pick found every backend it could go to
// at its request limit, until a place may have opened; then the request
// picks again from the pool's current members (a backend added meanwhile
// counts). It reports false when the request left the queue without a
// place: the queue was full, its time ran out or the client went away
// (r.end says which, for unqueued).
func (r *passage) wait() bool {
	r.end = r.p.await(r.x, &r.until, r.turn, r.seen)
	if r.end != recheck && !r.end.turn() {
		return false
	}
	r.snap, r.now, r.seen = r.p.state.Load(), time.Now(), r.p.queue.seq.Load()
	r.f, r.full, r.turn, r.picks = r.tried, false, r.end.turn(), 0
	return true
}

// unqueued answers a request that left the queue without a place.
func (r *passage) unqueued() Outcome { return r.p.unqueued(r.x, r.end) }

// passOn wakes the next waiter when this request got a place that no
// release announced (it was woken by the tick or by a chained wake):
// there may be more places for the next one.
func (r *passage) passOn() {
	if r.end == ticked || r.end == chained {
		r.p.queue.wakeWith(true)
		r.end = woken
	}
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
		return p.fail(x, attempt{status: 503, msg: "every backend is at its request limit and the queue is full", exhausted: true}, nil)
	case timedOut:
		return p.fail(x, attempt{status: 503, msg: "every backend is at its request limit: queue timeout", exhausted: true}, nil)
	}
	return Outcome{Status: 499}
}
