package supervisor

import (
	"context"
	"time"

	"relay/internal/stats"
)

// collector tracks the one collect in progress: which processes still owe
// an answer, and a channel closed when none does. Scrapes that overlap
// share it. Its fields are guarded by the Control's mutex.
type collector struct {
	next    uint64 // the number of the last collect sent
	waiting map[int]bool
	done    chan struct{}
	started time.Time
}

// staleCollect is how long a collect may wait for a process that does not
// answer before a new scrape gives up on it and starts afresh, so one
// stuck process cannot make every later scrape wait.
const staleCollect = time.Second

// arrived notes that process i answered collect n, or (n 0) that it will
// not: its channel ended.
func (c *collector) arrived(i int, n uint64) {
	if c.done == nil || (n != 0 && n != c.next) || !c.waiting[i] {
		return
	}
	delete(c.waiting, i)
	if len(c.waiting) == 0 {
		close(c.done)
		c.done = nil
	}
}

// Stats returns what relay counted, as one relay: every serving process is
// asked for its counters now, and the answers are summed with what exited
// processes counted before they ended. Counters are then exact up to the
// moment of the call. A process that does not answer before ctx ends
// counts with its last report (at most a second old).
func (l *Control) Stats(ctx context.Context) *stats.Process {
	l.mu.Lock()
	done := l.collect.done
	if done != nil && time.Since(l.collect.started) > staleCollect {
		close(done) // its waiters read what has come
		l.collect.done, done = nil, nil
	}
	if done == nil && len(l.byProc) > 0 {
		l.collect.next++
		l.collect.started = time.Now()
		l.collect.waiting = make(map[int]bool, len(l.byProc))
		done = make(chan struct{})
		l.collect.done = done
		for i, lk := range l.byProc {
			select {
			case lk.queue <- Message{Kind: KindCollect, Collect: l.collect.next}:
				l.collect.waiting[i] = true
			default: // a full queue: broadcast drops this process soon
			}
		}
		if len(l.collect.waiting) == 0 {
			close(done)
			l.collect.done = nil
		}
	}
	l.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	sum := &stats.Process{}
	sum.Add(&l.retired)
	for _, p := range l.latest {
		sum.Add(p)
	}
	sum.Sort()
	return sum
}
