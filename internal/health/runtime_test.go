package health

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
)

// waitUntil polls cond for up to ten seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAddToARunningChecker adds a backend that answers 503 to a checker
// that runs: it is probed at once, over a real connection, and its
// transition is reported, while the first backend stays untouched.
func TestAddToARunningChecker(t *testing.T) {
	var okReqs, badReqs atomic.Int64
	ok := serveKeep(t, func(c net.Conn, _, _ int) bool {
		okReqs.Add(1)
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		return true
	})
	bad := serveKeep(t, func(c net.Conn, _, _ int) bool {
		badReqs.Add(1)
		c.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"))
		return true
	})
	a, b := newBackend(t, "http://"+ok.addr), newBackend(t, "http://"+bad.addr)
	var tr transitions
	c, err := New(Config{Interval: 50 * time.Millisecond, Timeout: 5 * time.Second, Rise: 2, Fall: 3, ReuseConnection: true},
		[]*backend.Backend{a}, tr.onChange)
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
	defer c.Stop()
	waitUntil(t, "the first backend's probes", func() bool { return okReqs.Load() >= 2 })
	c.Add(b)
	c.Add(b) // a second Add of the same backend changes nothing
	waitUntil(t, "the added backend to go down", func() bool { return !b.Healthy() })
	if got := tr.list(); len(got) != 1 || got[0] {
		t.Fatalf("transitions %v, want one: down", got)
	}
	if n := len(c.Targets()); n != 2 {
		t.Fatalf("%d targets after adding one to one, want 2", n)
	}
	waitUntil(t, "the added backend's loop", func() bool { return badReqs.Load() >= 3 })
	if !a.Healthy() {
		t.Fatal("the first backend went down")
	}
}

// TestRemoveStopsProbing removes a backend from a running checker: it is
// not probed again and its kept connection is closed.
func TestRemoveStopsProbing(t *testing.T) {
	var reqs atomic.Int64
	srv := serveKeep(t, func(c net.Conn, _, _ int) bool {
		reqs.Add(1)
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
		return true
	})
	b := newBackend(t, "http://"+srv.addr)
	c, err := New(Config{Interval: 20 * time.Millisecond, Timeout: 5 * time.Second, Rise: 1, Fall: 1, ReuseConnection: true},
		[]*backend.Backend{b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
	defer c.Stop()
	waitUntil(t, "a few probes", func() bool { return reqs.Load() >= 3 })
	c.Remove(b)
	select {
	case <-srv.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the removed backend's kept connection was not closed")
	}
	after := reqs.Load()
	time.Sleep(200 * time.Millisecond) // ten intervals
	if n := reqs.Load(); n != after {
		t.Fatalf("the removed backend was probed %d more times", n-after)
	}
	if n := len(c.Targets()); n != 0 {
		t.Fatalf("%d targets after removing the only one", n)
	}
	c.Remove(b) // removing it again is harmless
}

// TestRemoveDuringAProbeReportsNothing: a probe cut short by Remove must
// not report a transition after Remove has returned.
func TestRemoveDuringAProbeReportsNothing(t *testing.T) {
	started := make(chan struct{}, 1)
	probe := func(ctx context.Context, _ *backend.Backend) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return errors.New("cut short")
	}
	b := newBackend(t, "http://127.0.0.1:1")
	var tr transitions
	c, err := New(Config{Interval: time.Hour, Timeout: time.Hour, Rise: 1, Fall: 1}, nil, tr.onChange, WithProbe(probe))
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
	defer c.Stop()
	c.Add(b)
	<-started
	c.Remove(b)
	if got := tr.list(); len(got) != 0 {
		t.Fatalf("transitions %v reported for a removed backend", got)
	}
	if !b.Healthy() {
		t.Fatal("a removed backend was marked down")
	}
}

// TestSetKeepsCounters: Set with a new Backend value of the same name keeps
// the run of failures, so the next failure completes it; new names are
// added and missing ones removed.
func TestSetKeepsCounters(t *testing.T) {
	fail := func(context.Context, *backend.Backend) error { return errors.New("down") }
	old := newBackend(t, "http://127.0.0.1:1")
	other := newBackend(t, "http://127.0.0.1:2")
	var tr transitions
	c, err := New(Config{Interval: time.Hour, Timeout: time.Second, Rise: 2, Fall: 3}, []*backend.Backend{old, other},
		tr.onChange, WithProbe(fail))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	ctx := context.Background()
	tgt := c.targets[old.Name]
	c.check(ctx, tgt, 2, 3)
	c.check(ctx, tgt, 2, 3)
	if !old.Healthy() {
		t.Fatal("down after two of three failures")
	}
	reloaded := newBackend(t, "http://127.0.0.1:1") // as a reload builds it
	added := newBackend(t, "http://127.0.0.1:3")
	c.Set([]*backend.Backend{reloaded, added})
	if c.targets[old.Name] != tgt {
		t.Fatal("Set replaced the target of a backend that stayed")
	}
	if c.targets[other.Name] != nil || c.targets[added.Name] == nil || len(c.Targets()) != 2 {
		t.Fatalf("targets after Set: %v", c.Targets())
	}
	c.check(ctx, tgt, 2, 3)
	if reloaded.Healthy() {
		t.Fatal("the third failure in a row, across Set, did not take the backend down")
	}
	if !old.Healthy() {
		t.Fatal("the old Backend value was changed after Set")
	}
	if got := tr.list(); len(got) != 1 || got[0] {
		t.Fatalf("transitions %v, want one: down", got)
	}
}
