package health

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"relay/internal/backend"
)

// maxParallel bounds the probes CheckAll runs at once, so a start-up check of
// thousands of backends does not open thousands of sockets at the same moment.
// Against black-holed backends CheckAll takes about
// len(backends)/maxParallel × Timeout.
const maxParallel = 256

// Checker runs active health checks over a fixed set of backends. Build one
// with New, call CheckAll once before serving, then Run; Stop ends it. A
// Checker runs once: after Stop, build a new one (for example on reload; the
// health state lives on the backends and carries over).
type Checker struct {
	cfg      Config
	targets  []*target
	onChange func(b *backend.Backend, healthy bool)
	probe    Probe // from WithProbe; nil means the built-in probe of cfg.Type
	clock    Clock
	randN    func(n int64) int64
	log      *slog.Logger

	mu      sync.Mutex // guards started and cancel
	started bool
	cancel  context.CancelFunc
	loops   sync.WaitGroup
}

// target is one backend, its probe and its run of consecutive results. mu
// serializes recording, so CheckAll and a loop never interleave on one
// backend, and onChange sees one backend's transitions in order.
type target struct {
	b      *backend.Backend
	probe  func(ctx context.Context) error
	close  func() // closes what the probe keeps between runs; may be nil
	mu     sync.Mutex
	passes int
	fails  int
}

// New returns a Checker for bs. onChange, which may be nil, is called after
// each transition with the backend's new state, before the transition is
// logged, so a logged transition has taken effect; it is called from the probe
// loops, so calls for different backends may run concurrently, and it must not
// call Stop. New reports every invalid Config field at once.
func New(cfg Config, bs []*backend.Backend, onChange func(b *backend.Backend, healthy bool), opts ...Option) (*Checker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Checker{
		cfg:      cfg,
		targets:  make([]*target, len(bs)),
		onChange: onChange,
		clock:    realClock{},
		randN:    rand.Int64N,
		log:      slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(c)
	}
	var bufs *sync.Pool
	if c.probe == nil && cfg.Type == TypeHTTP {
		bufs = newReadBufs()
	}
	for i, b := range bs {
		t := &target{b: b}
		switch {
		case c.probe != nil:
			probe := c.probe
			t.probe = func(ctx context.Context) error { return probe(ctx, b) }
		case cfg.Type == TypeTCP:
			t.probe = func(ctx context.Context) error { return tcpProbe(ctx, b) }
		default:
			h := newHTTPCheck(b, cfg.Path, cfg.ReuseConnection, bufs)
			t.probe, t.close = h.probe, h.closeIdle
		}
		c.targets[i] = t
	}
	return c, nil
}

// CheckAll probes every backend once, several at a time, and returns when all
// results are in. Each result decides on its own, whatever Rise and Fall say:
// CheckAll is meant for start-up, when there is no history to weigh and an
// empty or stale pool is worse than a strict one. Results that arrive after
// ctx is cancelled are dropped.
func (c *Checker) CheckAll(ctx context.Context) {
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for _, t := range c.targets {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			c.check(ctx, t, 1, 1)
		})
	}
	wg.Wait()
}

// Run starts one probe loop per backend and returns. The loops stop when ctx
// is cancelled or Stop is called. Calls after the first do nothing.
func (c *Checker) Run(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return
	}
	c.started = true
	ctx, c.cancel = context.WithCancel(ctx)
	starts, step := startGrid(len(c.targets), c.cfg.Interval)
	for _, t := range c.targets {
		offset := time.Duration(c.randN(starts)) * step
		c.loops.Go(func() { c.loop(ctx, t, offset) })
	}
}

// Stop cancels the loops and any probe in flight, returns once every loop
// has exited, and closes the connections probes kept. It is safe to call
// more than once, and before Run.
func (c *Checker) Stop() {
	c.mu.Lock()
	c.started = true // a Run after Stop must not start loops nobody will stop
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.loops.Wait()
	for _, t := range c.targets {
		if t.close != nil {
			t.close()
		}
	}
}

// loop probes one backend: first after offset, then every interval. The
// ticker is created before the first probe so probe time does not shift the
// cadence, and being the only caller for its backend, the loop cannot overlap
// its own probes.
func (c *Checker) loop(ctx context.Context, t *target, offset time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-c.clock.After(offset):
	}
	tick := c.clock.NewTicker(c.cfg.Interval)
	defer tick.Stop()
	for {
		c.check(ctx, t, c.cfg.Rise, c.cfg.Fall)
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
		}
	}
}

// check runs one probe and records its result against rise and fall.
func (c *Checker) check(ctx context.Context, t *target, rise, fall int) {
	pctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	err := t.probe(pctx)
	cancel()
	if ctx.Err() != nil {
		return // the checker is stopping: the failure is ours, not the backend's
	}
	c.record(t, err, rise, fall)
}

// record counts one result and flips the backend when a threshold is reached.
// The state is the backend's own flag, not a copy kept here, so a transition
// is reported only when the flag really changed, even if something else
// (passive failure detection, an operator) flips it too.
func (c *Checker) record(t *target, err error, rise, fall int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.fails = 0
		t.passes = min(t.passes+1, rise)
		if t.passes >= rise && t.b.SetHealthy(true) {
			// onChange first: once "backend up" is logged, the backend is
			// in rotation.
			c.notify(t.b, true)
			c.log.Info("backend up", "backend", t.b.Name, "healthy", true,
				"reason", fmt.Sprintf("%d consecutive checks passed", t.passes))
		}
		return
	}
	t.passes = 0
	t.fails = min(t.fails+1, fall)
	if t.fails >= fall && t.b.SetHealthy(false) {
		c.notify(t.b, false)
		c.log.Warn("backend down", "backend", t.b.Name, "healthy", false,
			"reason", err.Error(), "consecutive_failures", t.fails)
	}
}

func (c *Checker) notify(b *backend.Backend, healthy bool) {
	if c.onChange != nil {
		c.onChange(b, healthy)
	}
}
