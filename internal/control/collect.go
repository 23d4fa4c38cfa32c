package control

import (
	"context"
	"time"

	"relay/internal/stats"
	"relay/internal/supervisor"
)

// collector tracks the one collect in progress: which processes still owe
// an answer, and channels closed when none does and when only late ones
// do. Scrapes that overlap share it. Its fields are guarded by the
// Control's mutex.
type collector struct {
	next    uint64       // the number of the last collect sent
	waiting map[int]bool // the processes that owe it an answer
	// late are the processes that did not answer a collect while its
	// scrapes waited, until they answer the last one sent.
	late     map[int]bool
	done     chan struct{} // closed when none owes an answer; nil when no collect is in progress
	prompt   chan struct{} // closed when only late processes owe one
	onlyLate bool          // prompt is closed
	started  time.Time
}

// staleCollect is how long a collect may wait for a process that does not
// answer before a new scrape gives up on it and starts afresh, so one
// stuck process cannot make every later scrape wait.
const staleCollect = time.Second

// lateWait is how long a scrape waits for processes that did not answer
// the collect before, once every other process answered: a stuck process
// holds the one scrape that finds it stuck, not every scrape after it.
const lateWait = 100 * time.Millisecond

// arrived notes that process i answered collect n, or (n 0) that it will
// not: its channel ended.
func (c *collector) arrived(i int, n uint64) {
	if n == 0 || n == c.next {
		delete(c.late, i)
	}
	if c.done == nil || (n != 0 && n != c.next) || !c.waiting[i] {
		return
	}
	delete(c.waiting, i)
	c.settle()
}

// start sends a new collect down every link.
func (c *collector) start(links map[int]*link) {
	c.next++
	c.started = time.Now()
	c.waiting = make(map[int]bool, len(links))
	c.done, c.prompt, c.onlyLate = make(chan struct{}), make(chan struct{}), false
	for i, lk := range links {
		select {
		case lk.queue <- supervisor.Message{Kind: supervisor.KindCollect, Collect: c.next}:
			c.waiting[i] = true
		default: // a full queue: broadcast drops this process soon
		}
	}
	c.settle()
}

// settle closes prompt once only late processes owe the collect in
// progress an answer, and ends the collect once none does.
func (c *collector) settle() {
	if len(c.waiting) == 0 {
		c.finish()
		return
	}
	if c.onlyLate {
		return
	}
	for i := range c.waiting {
		if !c.late[i] {
			return
		}
	}
	close(c.prompt)
	c.onlyLate = true
}

// finish ends the collect in progress: the processes that still owe an
// answer are late from now on, and its scrapes read what has come.
func (c *collector) finish() {
	if c.late == nil {
		c.late = make(map[int]bool)
	}
	for i := range c.waiting {
		c.late[i] = true
	}
	c.waiting = nil
	close(c.done)
	if !c.onlyLate {
		close(c.prompt)
	}
	c.done, c.prompt = nil, nil
}

// Stats returns what relay counted, as one relay: every serving process is
// asked for its counters now, and the answers are summed with what exited
// processes counted before they ended. Counters are then exact up to the
// moment of the call for every process that answers before ctx ends. A
// process that did not answer the collect before is waited for at most
// lateWait once the others answered; one that does not answer counts with
// its last report.
func (l *Control) Stats(ctx context.Context) *stats.Process {
	l.mu.Lock()
	c := &l.collect
	if c.done != nil && (c.onlyLate || time.Since(c.started) > staleCollect) {
		// Only late processes owe the collect in progress an answer, or
		// it is stale: this scrape asks afresh.
		c.finish()
	}
	if c.done == nil && len(l.byProc) > 0 {
		c.start(l.byProc)
	}
	done, prompt, lateBy := c.done, c.prompt, c.started.Add(lateWait)
	l.mu.Unlock()
	if done != nil && !await(ctx, done, prompt, lateBy) {
		l.mu.Lock()
		if c.done == done {
			c.finish() // those that have not answered are late
		}
		l.mu.Unlock()
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

// await waits until done is closed, or ctx ends, or prompt is closed and
// lateBy has come, and reports whether done was closed.
func await(ctx context.Context, done, prompt <-chan struct{}, lateBy time.Time) bool {
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	case <-prompt:
	}
	t := time.NewTimer(time.Until(lateBy))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	case <-t.C:
		return false
	}
}
