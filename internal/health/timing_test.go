package health

import (
	"context"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
)

// These tests run on the real clock, with short intervals, to show the
// production ticker keeps the promises the fake clock tests rely on.

// TestProbesSpreadOverInterval starts 1,000 loops that TCP-probe one local
// listener every 200 ms and checks that their first probes are spread over
// the interval, in the small groups of the start grid, rather than fired in
// one burst. The offsets come from a seeded source the test replays, so it
// knows when each loop was meant to start: a timer never fires early, so no
// first probe may come before its offset, however loaded the machine is.
func TestProbesSpreadOverInterval(t *testing.T) {
	const n = 1000
	const interval = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	bs := make([]*backend.Backend, n)
	index := map[*backend.Backend]int{}
	for i := range bs {
		// Distinct backends, one address: the loops do not know they share
		// it. The checker tells backends apart by name.
		bs[i] = newBackend(t, "http://127.0.0.1:"+port)
		bs[i].Name += "#" + strconv.Itoa(i)
		index[bs[i]] = i
	}
	replay := rand.New(rand.NewPCG(7, 11))
	starts, step := startGrid(n, interval)
	planned := make([]time.Duration, n)
	early := 0 // loops planned to start in the first quarter of the interval
	for i := range planned {
		planned[i] = time.Duration(replay.Int64N(starts)) * step
		if planned[i] < interval/4 {
			early++
		}
	}
	if early > n*3/10 {
		t.Fatalf("%d of %d offsets in the first quarter of the interval; the seeded source is not uniform", early, n)
	}

	first := make([]time.Time, n) // first[i] is written only by backend i's loop
	var seen atomic.Int64
	all := make(chan struct{})
	probe := func(ctx context.Context, b *backend.Backend) error {
		i := index[b]
		if !first[i].IsZero() {
			return nil // later rounds would only churn ephemeral ports
		}
		first[i] = time.Now()
		err := tcpProbe(ctx, b)
		if seen.Add(1) == n {
			close(all)
		}
		return err
	}
	var tr transitions
	c, err := New(Config{Type: TypeTCP, Interval: interval, Timeout: 5 * time.Second, Rise: 1, Fall: 1}, bs, tr.onChange,
		WithProbe(probe), WithRand(rand.New(rand.NewPCG(7, 11)).Int64N))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Run(context.Background())
	select {
	case <-all:
	case <-time.After(20 * time.Second):
		c.Stop()
		t.Fatalf("only %d of %d loops probed within 20s", seen.Load(), n)
	}
	c.Stop()

	premature, inFirstQuarter := 0, 0
	late := make([]time.Duration, n)
	for i, f := range first {
		at := f.Sub(start)
		if at < planned[i] {
			premature++
		}
		if at < interval/4 {
			inFirstQuarter++
		}
		late[i] = at - planned[i]
	}
	if premature > 0 {
		t.Errorf("%d of %d loops probed before their start offset", premature, n)
	}
	if inFirstQuarter > early {
		t.Errorf("%d of %d first probes in the first quarter of the interval, want at most %d", inFirstQuarter, n, early)
	}
	if got := tr.list(); len(got) != 0 {
		t.Errorf("a listening backend changed state: %v", got)
	}
	slices.Sort(late)
	t.Logf("%d of %d first probes in the first %v; lateness against plan: median %v, max %v",
		inFirstQuarter, n, interval/4, late[n/2], late[n-1])
}

// TestDetectionTime checks the promised bounds on the real clock: a backend
// whose probes hang until the timeout is out within Fall×Interval + Timeout,
// and back within Rise×Interval once it answers again. The bounds rest on the
// probes of one backend starting every Interval even when each takes Timeout;
// a loop that waited an interval after each probe would start them
// Interval+Timeout apart and take Fall×(Interval+Timeout) to notice. Timers
// fire late on a loaded machine but never early, so the cadence is checked on
// the shortest gap, and the wall-clock bounds get generous slack.
func TestDetectionTime(t *testing.T) {
	const interval, timeout = 100 * time.Millisecond, 90 * time.Millisecond
	const rise, fall = 2, 3
	const slack = time.Second
	var hanging atomic.Bool
	var mu sync.Mutex
	var hangStarts []time.Time
	passed := make(chan struct{}, 1)
	probe := func(ctx context.Context, _ *backend.Backend) error {
		if hanging.Load() {
			mu.Lock()
			hangStarts = append(hangStarts, time.Now())
			mu.Unlock()
			<-ctx.Done()
			return ctx.Err()
		}
		select {
		case passed <- struct{}{}:
		default:
		}
		return nil
	}
	changes := make(chan bool, 4)
	b := newBackend(t, "http://127.0.0.1:1")
	c, err := New(Config{Interval: interval, Timeout: timeout, Rise: rise, Fall: fall}, []*backend.Backend{b},
		func(_ *backend.Backend, healthy bool) { changes <- healthy }, WithProbe(probe))
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
	defer c.Stop()
	<-passed

	wait := func(want bool, bound time.Duration) {
		t.Helper()
		start := time.Now()
		select {
		case got := <-changes:
			took := time.Since(start)
			if got != want {
				t.Fatalf("transition to healthy=%v, want %v", got, want)
			}
			if took > bound+slack {
				t.Errorf("healthy=%v after %v, want within %v", want, took, bound)
			}
			t.Logf("healthy=%v after %v (bound %v)", want, took, bound)
		case <-time.After(bound + 10*slack):
			t.Fatalf("no transition to healthy=%v", want)
		}
	}
	hanging.Store(true)
	wait(false, fall*interval+timeout)
	hanging.Store(false)
	wait(true, rise*interval)

	mu.Lock()
	defer mu.Unlock()
	if len(hangStarts) < fall {
		t.Fatalf("%d hanging probes before going down, want %d", len(hangStarts), fall)
	}
	shortest := time.Hour
	for i := 1; i < len(hangStarts); i++ {
		shortest = min(shortest, hangStarts[i].Sub(hangStarts[i-1]))
	}
	if shortest >= interval+timeout {
		t.Errorf("hanging probes start at least %v apart, want the %v cadence", shortest, interval)
	}
}

// TestProbesNeverOverlap gives one backend a probe three times slower than
// its interval and checks that probes run one at a time.
func TestProbesNeverOverlap(t *testing.T) {
	const interval = 10 * time.Millisecond
	var running, peak atomic.Int64
	var mu sync.Mutex
	calls := 0
	done := make(chan struct{})
	probe := func(ctx context.Context, _ *backend.Backend) error {
		now := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		select {
		case <-time.After(3 * interval):
		case <-ctx.Done():
		}
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 5 {
			close(done)
		}
		return nil
	}
	c, err := New(Config{Interval: interval, Timeout: time.Second, Rise: 1, Fall: 1},
		[]*backend.Backend{newBackend(t, "http://127.0.0.1:1")}, nil, WithProbe(probe))
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
	<-done
	c.Stop()
	if p := peak.Load(); p != 1 {
		t.Errorf("%d probes of one backend ran at once, want 1", p)
	}
}
