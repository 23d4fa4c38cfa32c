package core

import (
	"sync"
	"sync/atomic"
	"time"
)

// queue holds the requests of a pool that found every backend they could
// go to at its request limit (MaxRequests), first come first served, as
// HAProxy's maxconn queue and Envoy's pending requests do: a spike waits at
// relay instead of toppling the backends. A request that ends on a backend
// of the pool wakes the longest waiter, which picks again.
type queue struct {
	mu      sync.Mutex
	waiters []chan struct{}
	n       atomic.Int32 // len(waiters), read by every release
}

// wait queues the caller until a place may have opened or deadline passes,
// and reports which. A request woken before that did not find a place
// waits again at the front (again set), keeping its turn. full reports the
// queue held max waiters already, so the caller was not queued.
func (q *queue) wait(deadline time.Time, limit int, again bool) (woken, full bool) {
	ch := make(chan struct{}, 1)
	q.mu.Lock()
	if !again && len(q.waiters) >= limit {
		q.mu.Unlock()
		return false, true
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

	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-ch:
		return true, false
	case <-t.C:
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, w := range q.waiters {
		if w == ch {
			q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
			q.n.Add(-1)
			return false, false
		}
	}
	// Woken as the timer fired: take the turn.
	<-ch
	return true, false
}

// wake lets the longest waiter pick again. It costs one atomic load while
// nobody waits.
func (q *queue) wake() {
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
	ch <- struct{}{}
}

// Len is the number of requests waiting.
func (q *queue) Len() int { return int(q.n.Load()) }
