package health

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
)

func TestNewRejectsBadConfig(t *testing.T) {
	good := Config{Interval: time.Second, Timeout: time.Second, Rise: 1, Fall: 1}
	tests := []struct {
		name  string
		edit  func(*Config)
		wants []string // substrings of the error; none means valid
	}{
		{name: "defaults fill type and path", edit: func(*Config) {}},
		{name: "tcp", edit: func(c *Config) { c.Type = TypeTCP }},
		{name: "grpc with a service", edit: func(c *Config) { c.Type, c.GRPCService = TypeGRPC, "pkg.Svc" }},
		{name: "grpc service on an http check", edit: func(c *Config) { c.GRPCService = "pkg.Svc" },
			wants: []string{`gRPC service ("pkg.Svc") is set for checks of type "http"`}},
		{name: "grpc service not UTF-8", edit: func(c *Config) { c.Type, c.GRPCService = TypeGRPC, "a\xffb" },
			wants: []string{`gRPC service "a\xffb" is not valid UTF-8`}},
		{name: "unknown type", edit: func(c *Config) { c.Type = "icmp" }, wants: []string{`check type "icmp"`}},
		{name: "relative path", edit: func(c *Config) { c.Path = "health" }, wants: []string{`path "health"`}},
		{name: "path with a space", edit: func(c *Config) { c.Path = "/health check" }, wants: []string{`path "/health check"`}},
		{name: "path with a line break", edit: func(c *Config) { c.Path = "/health\r\nX: y" }, wants: []string{"control character"}},
		{name: "everything wrong at once",
			edit:  func(c *Config) { *c = Config{Interval: -1, Rise: 0, Fall: -2} },
			wants: []string{"interval -1ns", "timeout 0s", "rise 0", "fall -2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.edit(&cfg)
			c, err := New(cfg, nil, nil)
			if len(tt.wants) == 0 {
				if err != nil || c == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("New accepted an invalid config")
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestCheckAllDecidesOnOneProbe runs the start-up round over many backends,
// more than probe at once, with fall and rise thresholds that the loop would
// need several rounds to reach.
func TestCheckAllDecidesOnOneProbe(t *testing.T) {
	const n = 3*maxParallel + 7
	bs := make([]*backend.Backend, n)
	for i := range bs {
		bs[i] = newBackend(t, fmt.Sprintf("http://10.0.%d.%d:80", i/250, i%250))
		bs[i].SetHealthy(i%3 != 2) // every third starts down
	}
	// Backends 0, 3, 6... fail; the others pass.
	failing := func(b *backend.Backend) bool {
		for i := range bs {
			if bs[i] == b {
				return i%3 == 0
			}
		}
		panic("unknown backend")
	}
	// The first probes hold on until maxParallel of them are in flight and a
	// little longer, time enough for an unbounded CheckAll to start them all.
	var inFlight, peak atomic.Int64
	full := make(chan struct{})
	var fullOnce sync.Once
	gate := make(chan struct{})
	go func() {
		<-full
		time.Sleep(20 * time.Millisecond)
		close(gate)
	}()
	probe := func(ctx context.Context, b *backend.Backend) error {
		now := inFlight.Add(1)
		defer inFlight.Add(-1)
		for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
		}
		if now == maxParallel {
			fullOnce.Do(func() { close(full) })
		}
		<-gate
		if failing(b) {
			return errProbe
		}
		return nil
	}
	var mu sync.Mutex
	changed := map[*backend.Backend]bool{}
	onChange := func(b *backend.Backend, healthy bool) {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := changed[b]; dup {
			t.Errorf("%s reported twice", b)
		}
		changed[b] = healthy
	}
	c, err := New(Config{Interval: time.Minute, Timeout: time.Second, Rise: 5, Fall: 5}, bs, onChange, WithProbe(probe))
	if err != nil {
		t.Fatal(err)
	}
	c.CheckAll(context.Background())

	for i, b := range bs {
		wantHealthy := i%3 != 0
		if b.Healthy() != wantHealthy {
			t.Errorf("backend %d healthy=%v, want %v", i, b.Healthy(), wantHealthy)
		}
		got, reported := changed[b]
		switch {
		case i%3 == 0 && (!reported || got): // started healthy, failed
			t.Errorf("backend %d: want one report of going down, got reported=%v healthy=%v", i, reported, got)
		case i%3 == 2 && (!reported || !got): // started down, passed
			t.Errorf("backend %d: want one report of coming up, got reported=%v healthy=%v", i, reported, got)
		case i%3 == 1 && reported: // started healthy, passed
			t.Errorf("backend %d: no transition, but it was reported", i)
		}
	}
	if p := peak.Load(); p > maxParallel {
		t.Errorf("%d probes ran at once, want at most %d", p, maxParallel)
	}
}

func TestCheckAllStopsWhenCancelled(t *testing.T) {
	bs := []*backend.Backend{newBackend(t, "http://127.0.0.1:1"), newBackend(t, "http://127.0.0.1:2")}
	ctx, cancel := context.WithCancel(context.Background())
	probe := func(pctx context.Context, _ *backend.Backend) error {
		cancel()
		<-pctx.Done()
		return pctx.Err()
	}
	c, err := New(Config{Interval: time.Minute, Timeout: time.Minute, Rise: 1, Fall: 1}, bs, nil, WithProbe(probe))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.CheckAll(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("CheckAll did not return after its context was cancelled")
	}
	for _, b := range bs {
		if !b.Healthy() {
			t.Errorf("%s marked down by a cancelled check", b)
		}
	}
}

// TestStopWaitsForLoops stops loops that are in the middle of a probe and
// checks that all of them have returned, that the cancelled probes were not
// counted as failures, and that no goroutine is left behind.
func TestStopWaitsForLoops(t *testing.T) {
	before := runtime.NumGoroutine()
	const n = 50
	bs := make([]*backend.Backend, n)
	for i := range bs {
		bs[i] = newBackend(t, fmt.Sprintf("http://127.0.0.1:%d", 10000+i))
	}
	var running atomic.Int64
	started := make(chan struct{}, n)
	probe := func(ctx context.Context, _ *backend.Backend) error {
		running.Add(1)
		defer running.Add(-1)
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	var tr transitions
	c, err := New(Config{Interval: time.Hour, Timeout: time.Hour, Rise: 1, Fall: 1}, bs, tr.onChange,
		WithProbe(probe), WithClock(newFakeClock(n, true)))
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
	for range n {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("not every loop started probing")
		}
	}
	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return")
	}
	if r := running.Load(); r != 0 {
		t.Errorf("%d probes still running after Stop", r)
	}
	if got := tr.list(); len(got) != 0 {
		t.Errorf("cancelled probes caused transitions %v", got)
	}
	waitGoroutines(t, before)
	c.Stop() // a second Stop is harmless
}

func TestRunAfterStopStartsNothing(t *testing.T) {
	clk := newFakeClock(1, true)
	c, err := New(Config{Interval: time.Second, Timeout: time.Second, Rise: 1, Fall: 1},
		[]*backend.Backend{newBackend(t, "http://127.0.0.1:1")}, nil,
		WithClock(clk), WithProbe(func(context.Context, *backend.Backend) error { return errors.New("probed") }))
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	c.Run(context.Background())
	c.Stop()
	if len(clk.afters) != 0 {
		t.Error("Run after Stop started a loop")
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	clk := newFakeClock(1, false)
	c, err := New(Config{Interval: time.Second, Timeout: time.Second, Rise: 1, Fall: 1},
		[]*backend.Backend{newBackend(t, "http://127.0.0.1:1")}, nil, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.Run(ctx)
	<-clk.afters // the loop is waiting for its start offset
	cancel()
	done := make(chan struct{})
	go func() { c.loops.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("loop did not exit when Run's context was cancelled")
	}
}

// TestStartOffsetsSpread checks that loop start offsets come from the injected
// source, fall on the start grid, and cover its points evenly.
func TestStartOffsetsSpread(t *testing.T) {
	const n = 1000
	const interval = 5 * time.Second
	starts, step := startGrid(n, interval)
	if starts < 10 {
		t.Fatalf("%d loops share %d start times; the test needs at least 10", n, starts)
	}
	bs := make([]*backend.Backend, n)
	for i := range bs {
		bs[i] = newBackend(t, fmt.Sprintf("http://10.1.%d.%d:80", i/250, i%250))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	clk := newFakeClock(n, false)
	c, err := New(Config{Interval: interval, Timeout: time.Second, Rise: 1, Fall: 1}, bs, nil,
		WithClock(clk), WithRand(rng.Int64N))
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
	defer c.Stop()
	counts := make([]int, starts)
	for range n {
		var d time.Duration
		select {
		case d = <-clk.afters:
		case <-time.After(5 * time.Second):
			t.Fatal("not every loop asked for its start offset")
		}
		if d < 0 || d >= interval || d%step != 0 {
			t.Fatalf("offset %v is not one of the %d start times %v apart in [0, %v)", d, starts, step, interval)
		}
		counts[d/step]++
	}
	per := n / int(starts)
	for i, got := range counts {
		if got < per/2 || got > per*3/2 {
			t.Errorf("%d of %d loops start at time %d of %d, want about %d: %v", got, n, i, starts, per, counts)
		}
	}
}

func TestStartGrid(t *testing.T) {
	tests := []struct {
		name      string
		loops     int
		interval  time.Duration
		wantStart int64
	}{
		{name: "no loops", loops: 0, interval: time.Second, wantStart: 1},
		{name: "a few loops start together", loops: 3, interval: time.Second, wantStart: 1},
		{name: "one full group", loops: loopsPerStart, interval: time.Second, wantStart: 1},
		{name: "one more loop opens a second start", loops: loopsPerStart + 1, interval: time.Second, wantStart: 2},
		{name: "a thousand loops", loops: 1000, interval: 5 * time.Second, wantStart: (1000 + loopsPerStart - 1) / loopsPerStart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			starts, step := startGrid(tt.loops, tt.interval)
			if starts != tt.wantStart {
				t.Errorf("%d start times, want %d", starts, tt.wantStart)
			}
			if want := tt.interval / time.Duration(tt.wantStart); step != want {
				t.Errorf("start times %v apart, want %v", step, want)
			}
			if per := (tt.loops + int(starts) - 1) / int(starts); per > loopsPerStart {
				t.Errorf("%d loops per start time, want at most %d", per, loopsPerStart)
			}
		})
	}
}

// waitGoroutines waits for the goroutine count to come back to want. A loop
// that has signalled its exit may still be unwinding, hence the short polling.
func waitGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), want, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}
