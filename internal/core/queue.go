package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// queue holds the requests of a pool that found every backend they could
// go to at its request limit (MaxRequests), first come first served, as
// HAProxy's maxconn queue and Envoy's pending requests do: a spike waits at
// relay instead of toppling the backends.
//
// A request that ends on a backend of the pool wakes the longest waiter,
// which picks again. Places also open without a request ending: a backend
// passes its health check, its breaker closes or its ejection runs out, a
// backend joins the pool. Nothing announces those, so the longest waiter
// also picks again every queueTick; when it gets a place, it wakes the next
// one with a chained wake, which does the same, and so on while places last.
type queue struct {
	mu      sync.Mutex
	waiters []chan bool  // a wake sends whether it is chained
	n       atomic.Int32 // len(waiters), read by every wake
	// seq counts wakes. A request reads it before it picks; when it has
	// moved by the time the request is queued, a place may have opened
	// that no waiter was woken for (the releaser saw an empty queue), so
	// the request picks again at once.
	seq atomic.Uint64
}

// queueTick is how often the longest waiter picks again unwoken, and how
// often every waiter looks whether its client went away.
const queueTick = 100 * time.Millisecond

// waitEnd is how a wait in the queue ended.
type waitEnd uint8

const (
	woken      waitEnd = iota // a request ended: pick again
	chained                   // a waiter found a place nobody announced: pick again, and pass it on
	ticked                    // the longest waiter's turn to look: pick again, and pass it on
	recheck                   // a request ended while the caller picked: pick again, not yet queued
	timedOut                  // the deadline passed
	queueFull                 // the queue held its limit already
	clientGone                // the request's client went away
)

// turn reports whether the wait ended with the request's turn to pick: it
// waits again at the front if it finds no place.
func (e waitEnd) turn() bool { return e == woken || e == chained || e == ticked }

// wait queues the caller until a place may have opened, the deadline
// passes, or gone reports the client went away. A request whose turn came
// but that found no place waits again at the front (again set). seen is
// q.seq as the caller read it before it picked.
func (q *queue) wait(deadline time.Time, limit int, again bool, seen uint64, gone func() bool) waitEnd {
	ch := make(chan bool, 1)
	q.mu.Lock()
	if !again && len(q.waiters) >= limit {
		q.mu.Unlock()
		return queueFull
	}
	if again {
		q.waiters = append(q.waiters, nil)
		copy(q.waiters[1:], q.waiters)
		q.waiters[0] = ch
	} else {
		q.waiters = append(q.waiters, ch)
	}
	q.n.Add(1)
	q.mu.Unlock()

	if q.seq.Load() != seen {
		// A request ended while the caller picked, and the wake may have
		// found nobody queued: pick again, without taking anyone's turn
		// (unless it was given one meanwhile).
		return q.leave(ch)
	}
	t := time.NewTimer(min(time.Until(deadline), queueTick))
	defer t.Stop()
	for {
		select {
		case chain := <-ch:
			return wakeEnd(chain)
		case <-t.C:
		}
		now := time.Now()
		switch {
		case !now.Before(deadline):
			if end := q.leave(ch); end != recheck {
				return end // woken as the time ran out: take the turn
			}
			return timedOut
		case gone():
			if end := q.leave(ch); end != recheck {
				q.wakeWith(end == chained) // the turn goes to the next
			}
			return clientGone
		case q.head(ch):
			if end := q.leave(ch); end != recheck {
				return end
			}
			return ticked
		}
		t.Reset(min(deadline.Sub(now), queueTick))
	}
}

func wakeEnd(chain bool) waitEnd {
	if chain {
		return chained
	}
	return woken
}

// leave takes ch out of the queue and returns recheck. When ch had been
// woken already, it was no longer queued: leave takes the wake and returns
// it (woken or chained).
func (q *queue) leave(ch chan bool) waitEnd {
	q.mu.Lock()
	for i, w := range q.waiters {
		if w == ch {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			q.n.Add(-1)
			q.mu.Unlock()
			return recheck
		}
	}
	q.mu.Unlock()
	return wakeEnd(<-ch) // wake sends right after taking ch out
}

// head reports whether ch is the longest waiter.
func (q *queue) head(ch chan bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiters) > 0 && q.waiters[0] == ch
}

// wake lets the longest waiter pick again after a request ended. While
// nobody waits it costs one atomic add and one load; pools without request
// limits never call it.
func (q *queue) wake() { q.wakeWith(false) }

// wakeWith wakes the longest waiter; chain asks it to wake the next one in
// turn if it gets a place, for places that opened without a request ending.
func (q *queue) wakeWith(chain bool) {
	q.seq.Add(1)
	if q.n.Load() == 0 {
		return
	}
	q.mu.Lock()
	if len(q.waiters) == 0 {
		q.mu.Unlock()
		return
	}
	ch := q.waiters[0]
	q.waiters[0] = nil
	q.waiters = q.waiters[1:]
	q.n.Add(-1)
	q.mu.Unlock()
	ch <- chain
}

// Len is the number of requests waiting.
func (q *queue) Len() int { return int(q.n.Load()) }
