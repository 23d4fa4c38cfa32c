package health

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
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

// TestSetCarriesTheVerdict: a reload's new Backend value starts healthy;
// Set gives it the verdict the checks reached, so a backend that is down
// stays out, and coming back still takes Rise passes.
func TestSetCarriesTheVerdict(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	probe := func(context.Context, *backend.Backend) error {
		if failing.Load() {
			return errProbe
		}
		return nil
	}
	old := newBackend(t, "http://127.0.0.1:1")
	var tr transitions
	c, err := New(Config{Interval: time.Hour, Timeout: time.Second, Rise: 2, Fall: 1}, []*backend.Backend{old},
		tr.onChange, WithProbe(probe))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	ctx := context.Background()
	tgt := c.targets[old.Name]
	c.check(ctx, tgt, 2, 1)
	if old.Healthy() {
		t.Fatal("up after a failure with fall 1")
	}
	reloaded := newBackend(t, "http://127.0.0.1:1")
	c.Set([]*backend.Backend{reloaded})
	if reloaded.Healthy() {
		t.Fatal("a backend that is down came back with its new Backend value")
	}
	failing.Store(false)
	c.check(ctx, tgt, 2, 1)
	if reloaded.Healthy() {
		t.Fatal("one pass of rise 2 brought the backend back")
	}
	c.check(ctx, tgt, 2, 1)
	if !reloaded.Healthy() {
		t.Fatal("two passes of rise 2 did not bring the backend back")
	}
	if got := tr.list(); len(got) != 2 || got[0] || !got[1] {
		t.Fatalf("transitions %v, want down then up: Set itself reports none", got)
	}
}

// TestSetOnARunningChecker replaces the targets of a running checker over
// real connections: the backend that goes is not probed again and its
// kept connection is closed, the new one is probed, and the one that stays
// follows its new Backend value on the connection it already had.
func TestSetOnARunningChecker(t *testing.T) {
	type server struct {
		*keepServer
		reqs atomic.Int64
	}
	start := func() *server {
		s := new(server)
		s.keepServer = serveKeep(t, func(c net.Conn, _, _ int) bool {
			s.reqs.Add(1)
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
			return true
		})
		return s
	}
	stay, leave, come := start(), start(), start()
	stayB, leaveB := newBackend(t, "http://"+stay.addr), newBackend(t, "http://"+leave.addr)
	c, err := New(Config{Interval: 20 * time.Millisecond, Timeout: 5 * time.Second, Rise: 1, Fall: 1, ReuseConnection: true},
		[]*backend.Backend{stayB, leaveB}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
	defer c.Stop()
	waitUntil(t, "probes of both backends", func() bool { return stay.reqs.Load() >= 3 && leave.reqs.Load() >= 3 })

	stayNew, comeB := newBackend(t, "http://"+stay.addr), newBackend(t, "http://"+come.addr)
	c.Set([]*backend.Backend{stayNew, comeB})
	select {
	case <-leave.closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the kept connection of the backend Set left out was not closed")
	}
	left := leave.reqs.Load()
	before := stay.reqs.Load()
	waitUntil(t, "probes of the new backend and of the one that stayed", func() bool {
		return come.reqs.Load() >= 3 && stay.reqs.Load() >= before+3
	})
	if n := leave.reqs.Load(); n != left {
		t.Fatalf("the backend Set left out was probed %d more times", n-left)
	}
	if n := stay.conns.Load(); n != 1 {
		t.Fatalf("the backend that stayed was probed over %d connections, want its one kept connection", n)
	}
	got := c.Targets()
	if len(got) != 2 || got[0] != stayNew || got[1] != comeB {
		t.Fatalf("targets after Set: %v, want the new value of the one that stayed and the new one", got)
	}
}

// TestAddedTargetsAreBoundedAndSpread adds more backends to a running
// checker than CheckAll probes at once: their first probes run at most
// maxParallel at a time, and their loops then start on a grid of their
// own in (0, Interval], not all at once.
func TestAddedTargetsAreBoundedAndSpread(t *testing.T) {
	const n = maxParallel + 200
	const interval = 5 * time.Second
	var inFlight, most atomic.Int64
	release := make(chan struct{})
	probe := func(ctx context.Context, _ *backend.Backend) error {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	clk := newFakeClock(n, false)
	rng := rand.New(rand.NewPCG(3, 4))
	c, err := New(Config{Interval: interval, Timeout: time.Hour, Rise: 1, Fall: 1}, nil, nil,
		WithProbe(probe), WithClock(clk), WithRand(rng.Int64N))
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
	defer c.Stop()
	bs := make([]*backend.Backend, n)
	for i := range bs {
		bs[i] = newBackend(t, fmt.Sprintf("http://10.2.%d.%d:80", i/250, i%250))
	}
	c.Set(bs)
	waitUntil(t, "the first probes", func() bool { return inFlight.Load() >= maxParallel })
	time.Sleep(50 * time.Millisecond) // room for a probe beyond the bound
	if m := most.Load(); m > maxParallel {
		t.Fatalf("%d first probes ran at once, want at most %d", m, maxParallel)
	}
	close(release)
	starts, step := startGrid(n, interval)
	counts := make([]int, starts)
	for range n {
		var d time.Duration
		select {
		case d = <-clk.afters:
		case <-time.After(5 * time.Second):
			t.Fatal("not every added loop asked for its start offset")
		}
		if d <= 0 || d > interval || d%step != 0 {
			t.Fatalf("offset %v is not one of the %d start times %v apart in (0, %v]", d, starts, step, interval)
		}
		counts[d/step-1]++
	}
	for i, got := range counts {
		if got == 0 || got > n/int(starts)*2 {
			t.Errorf("%d of %d added loops start at time %d of %d: %v", got, n, i, starts, counts)
		}
	}
}

// TestTargetsChurn adds, removes and sets targets from several goroutines
// while their loops probe, for the race detector; afterwards Stop leaves
// no loop behind.
func TestTargetsChurn(t *testing.T) {
	before := runtime.NumGoroutine()
	bs := make([]*backend.Backend, 20)
	for i := range bs {
		bs[i] = newBackend(t, fmt.Sprintf("http://127.0.0.1:%d", 20000+i))
	}
	var probes atomic.Int64
	probe := func(context.Context, *backend.Backend) error {
		if probes.Add(1)%3 == 0 {
			return errProbe
		}
		return nil
	}
	c, err := New(Config{Interval: time.Millisecond, Timeout: time.Second, Rise: 1, Fall: 1}, bs[:10],
		func(*backend.Backend, bool) {}, WithProbe(probe))
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 200 {
				time.Sleep(200 * time.Microsecond) // let loops probe in between
				b := bs[rng.IntN(len(bs))]
				switch rng.IntN(4) {
				case 0:
					c.Add(b)
				case 1:
					c.Remove(b)
				case 2:
					reloaded := newBackend(t, b.URL.String())
					c.Set([]*backend.Backend{reloaded, bs[rng.IntN(len(bs))]})
				default:
					c.Targets()
				}
			}
		})
	}
	wg.Wait()
	c.Stop()
	if probes.Load() == 0 {
		t.Error("nothing was probed")
	}
	waitGoroutines(t, before)
}
