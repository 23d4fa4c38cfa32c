package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/stats"
)

// TestConcurrentChangesEndWithEveryChange: admin calls arrive on
// concurrent connections; every one lands, and the checks end with the
// targets of the final membership, not of a change that finished late.
func TestConcurrentChangesEndWithEveryChange(t *testing.T) {
	l := NewControl(ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 50, slog.New(slog.DiscardHandler))
	var mu sync.Mutex
	var last []*backend.Backend
	l.SetTargets(func(bs []*backend.Backend) {
		mu.Lock()
		last = bs
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if _, err := l.Add(fmt.Sprintf("http://127.0.0.1:%d", 9000+i), 1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(l.members) != 21 || len(last) != 21 {
		t.Fatalf("%d members and %d check targets after 20 concurrent adds, want 21 and 21", len(l.members), len(last))
	}
	if _, err := l.Add("http://127.0.0.1:9000", 1); err == nil {
		t.Fatal("adding a backend twice succeeded")
	}
	if err := l.SetWeight("http://127.0.0.1:9000", 0); err == nil {
		t.Fatal("weight 0 accepted")
	}
	if err := l.Remove("http://127.0.0.1:9999"); err == nil {
		t.Fatal("removing an unknown backend succeeded")
	}
	if len(l.members) != 21 {
		t.Fatalf("bad calls changed the membership: %d members", len(l.members))
	}
}

// TestAStuckProcessDoesNotHoldEveryScrape: a process that never answers a
// collect costs the scrape that asked it its wait, but the next scrape
// after staleCollect asks afresh instead of waiting on the stuck one, and
// the processes that answer are counted either way.
func TestAStuckProcessDoesNotHoldEveryScrape(t *testing.T) {
	bs := newBackends(t, "http://127.0.0.1:8001")
	l := NewControl(ConfigSource{Generation: 1}, bs, 50, slog.New(slog.DiscardHandler))
	attachProcess(t, l, 0) // reads nothing more: never answers
	live := attachProcess(t, l, 1)
	err := live.Follow(newBackends(t, "http://127.0.0.1:8001"), Updates{Stats: func() *stats.Process {
		return &stats.Process{ConnsAccepted: 7}
	}})
	if err != nil {
		t.Fatal(err)
	}
	scrape := func() *stats.Process {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		return l.Stats(ctx)
	}
	if st := scrape(); st.ConnsAccepted != 7 {
		t.Fatalf("first scrape counted %d accepted connections, want the live process's 7", st.ConnsAccepted)
	}
	time.Sleep(staleCollect + 100*time.Millisecond)
	scrape()
	l.mu.Lock()
	n := l.collect.next
	l.mu.Unlock()
	if n != 2 {
		t.Fatalf("collects sent: %d; want a second one once the first went stale", n)
	}
}
