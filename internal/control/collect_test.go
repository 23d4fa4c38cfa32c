package control

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/stats"
	"relay/internal/supervisor"
)

// TestAStuckProcessHoldsOnlyTheScrapeThatFindsIt: a process that does not
// answer costs the scrape that first asks it that scrape's wait. Later
// scrapes wait for it at most lateWait, and still count exactly what the
// processes that answer have counted when they ask. Once it answers
// again, scrapes wait for it and count it exactly too.
func TestAStuckProcessHoldsOnlyTheScrapeThatFindsIt(t *testing.T) {
	bs := newBackends(t, "http://127.0.0.1:8001")
	l := NewControl(supervisor.ConfigSource{Generation: 1}, bs, 50, slog.New(slog.DiscardHandler))
	stuck, live := attachProcess(t, l, 0), attachProcess(t, l, 1)
	gate := make(chan struct{})
	var open sync.Once
	t.Cleanup(func() { open.Do(func() { close(gate) }) })
	err := follow(stuck, newBackends(t, "http://127.0.0.1:8001"), Updates{Stats: func() *stats.Process {
		<-gate
		return &stats.Process{ConnsAccepted: 100}
	}})
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Uint64
	accepted.Store(7)
	err = follow(live, newBackends(t, "http://127.0.0.1:8001"), Updates{Stats: func() *stats.Process {
		return &stats.Process{ConnsAccepted: accepted.Load()}
	}})
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(wait time.Duration) (uint64, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		start := time.Now()
		n := l.Stats(ctx).ConnsAccepted
		return n, time.Since(start)
	}

	if n, _ := scrape(200 * time.Millisecond); n != 7 {
		t.Fatalf("the first scrape counted %d accepted connections, want the live process's 7", n)
	}
	for i := range uint64(3) {
		accepted.Store(8 + i)
		n, took := scrape(ioTimeout)
		if n != 8+i {
			t.Fatalf("scrape %d counted %d accepted connections, want the live process's %d as it answered", i+2, n, 8+i)
		}
		if took > ioTimeout/2 {
			t.Fatalf("scrape %d waited %v for a process that did not answer the scrape before", i+2, took)
		}
	}

	open.Do(func() { close(gate) }) // it answers again
	waitFor(t, "the stuck process to answer the last collect", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return !l.collect.late[0]
	})
	if n, _ := scrape(ioTimeout); n != 110 {
		t.Fatalf("a scrape once both answer counted %d accepted connections, want 100 and 10", n)
	}
}
