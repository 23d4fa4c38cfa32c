package health

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"relay/internal/backend"
	"relay/internal/fds"
	"relay/internal/logging"
)

// maxParallel bounds the probes CheckAll runs at once, so a start-up check of
// thousands of backends does not open thousands of sockets at the same moment.
// Against black-holed backends CheckAll takes about
// len(backends)/maxParallel × Timeout.
const maxParallel = 256

// Checker runs active health checks over a set of backends that can change
// while it runs (Add, Remove, Set). Build one with New, call CheckAll once
// before serving, then Run; Stop ends it. A Checker runs once: after Stop,
// build a new one (the health state lives on the backends and carries over).
type Checker struct {
	cfg      Config
	onChange func(b *backend.Backend, healthy bool)
	probe    Probe // from WithProbe; nil means the built-in probe of cfg.Type
	clock    Clock
	randN    func(n int64) int64
	log      *slog.Logger
	bufs     *sync.Pool       // answer readers of HTTP probes
	firsts   chan struct{}    // bounds the first probes of added targets to maxParallel
	fds      *fds.Budget      // the descriptors probes take; nil: no bound
	short    *logging.Limited // warnings that probes found no descriptor

	mu      sync.Mutex         // guards targets, order, started, stopped and ctx
	targets map[string]*target // by backend name
	order   []*target          // in the order they were added, so start offsets replay
	started bool
	stopped bool
	ctx     context.Context // the loops' context once Run has started them
	cancel  context.CancelFunc
	loops   sync.WaitGroup
}

// target is one backend, its probe and its run of consecutive results. mu
// serializes recording, so CheckAll and a loop never interleave on one
// backend, and onChange sees one backend's transitions in order.
type target struct {
	probe func(ctx context.Context) error
	close func() // closes what the probe keeps between runs; may be nil
	// kept reports whether the probe keeps a connection now, and with it
	// the place it took in the descriptor budget; nil for a probe that
	// never keeps one. place says the target holds a place.
	kept  func() bool
	place atomic.Bool

	mu      sync.Mutex
	b       *backend.Backend // the backend's current value (Set may replace it)
	passes  int
	fails   int
	removed bool // Remove has run: report nothing more

	cancel context.CancelFunc // stops this target's loop; nil before it runs
	done   chan struct{}      // closed when its loop has exited
}

// New returns a Checker for bs, told apart by Name: of several backends with
// one name, the first is checked. onChange, which may be nil, is called after
// each transition with the backend's new state, before the transition is
// logged, so a logged transition has taken effect; it is called from the probe
// loops, so calls for different backends may run concurrently, and it must not
// call Stop, Add, Remove or Set. New reports every invalid Config field at once.
func New(cfg Config, bs []*backend.Backend, onChange func(b *backend.Backend, healthy bool), opts ...Option) (*Checker, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Checker{
		cfg:      cfg,
		targets:  make(map[string]*target, len(bs)),
		firsts:   make(chan struct{}, maxParallel),
		onChange: onChange,
		clock:    realClock{},
		randN:    rand.Int64N,
		log:      slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(c)
	}
	c.short = logging.NewLimited(c.log, 1, shortLogEvery)
	if c.probe == nil && cfg.Type == TypeHTTP {
		c.bufs = newReadBufs()
	}
	for _, b := range bs {
		if c.targets[b.Name] == nil {
			c.addLocked(c.newTarget(b))
		}
	}
	return c, nil
}

// newTarget builds the target of b with the configured probe. The built-in
// probes are built from b once: what they use (scheme, host and port) is
// what Name is made of, so they stay right when Set hands in a new value.
func (c *Checker) newTarget(b *backend.Backend) *target {
	t := &target{b: b}
	switch {
	case c.probe != nil:
		probe := c.probe
		t.probe = func(ctx context.Context) error { return probe(ctx, t.backend()) }
	case c.cfg.Type == TypeTCP:
		t.probe = func(ctx context.Context) error { return tcpProbe(ctx, b) }
	case c.cfg.Type == TypeGRPC:
		g := newGRPCCheck(b, c.cfg.GRPCService, c.cfg.Timeout, c.cfg.ReuseConnection)
		t.probe, t.close = g.probe, g.closeIdle
		if c.cfg.ReuseConnection {
			t.kept = g.holds
		}
	default:
		h := newHTTPCheck(b, c.cfg.Path, c.cfg.ReuseConnection, c.bufs)
		t.probe, t.close = h.probe, h.closeIdle
		if c.cfg.ReuseConnection {
			t.kept = h.holds
		}
	}
	return t
}

// addLocked records t; c.mu is held or c is not shared yet.
func (c *Checker) addLocked(t *target) {
	c.targets[t.b.Name] = t
	c.order = append(c.order, t)
}

// dropLocked forgets t; c.mu is held.
func (c *Checker) dropLocked(name string, t *target) {
	delete(c.targets, name)
	c.order = slices.DeleteFunc(c.order, func(x *target) bool { return x == t })
}

// backend returns the target's current backend value.
func (t *target) backend() *backend.Backend {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b
}

// list returns the current targets.
func (c *Checker) list() []*target {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.order)
}

// Targets returns the backends the checker probes now.
func (c *Checker) Targets() []*backend.Backend {
	ts := c.list()
	bs := make([]*backend.Backend, len(ts))
	for i, t := range ts {
		bs[i] = t.backend()
	}
	return bs
}

// CheckAll probes every backend once, several at a time, and returns when all
// results are in. Each result decides on its own, whatever Rise and Fall say:
// CheckAll is meant for start-up, when there is no history to weigh and an
// empty or stale pool is worse than a strict one. Results that arrive after
// ctx is cancelled are dropped.
func (c *Checker) CheckAll(ctx context.Context) {
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for _, t := range c.list() {
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
	c.ctx, c.cancel = context.WithCancel(ctx)
	starts, step := startGrid(len(c.order), c.cfg.Interval)
	for _, t := range c.order {
		c.startLocked(t, time.Duration(c.randN(starts))*step, false)
	}
}

// startLocked starts t's loop, first after offset; c.mu is held and the
// checker runs. A target added at runtime (first) is probed at once, its
// first result deciding alone as in CheckAll, so a dead backend added to a
// running relay leaves rotation within one probe rather than after Fall
// intervals; like CheckAll's, at most maxParallel such probes run at a time,
// so a Set that brings a thousand backends does not open a thousand sockets
// at the same moment.
func (c *Checker) startLocked(t *target, offset time.Duration, first bool) {
	ctx, cancel := context.WithCancel(c.ctx)
	t.cancel, t.done = cancel, make(chan struct{})
	c.loops.Go(func() {
		defer close(t.done)
		if first {
			select {
			case c.firsts <- struct{}{}:
			case <-ctx.Done():
				return
			}
			c.check(ctx, t, 1, 1)
			<-c.firsts
		}
		c.loop(ctx, t, offset)
	})
}

// Add starts checking b, if no backend of its name is checked already. When
// the checker runs, b is probed at once and then on its own loop.
func (c *Checker) Add(b *backend.Backend) { c.add([]*backend.Backend{b}) }

// add starts checking those of bs whose names are not checked yet. Loops
// started together take their start offsets on a grid of their own, as
// Run's do (see spread.go), in (0, Interval] since each has just been
// probed.
func (c *Checker) add(bs []*backend.Backend) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var added []*target
	for _, b := range bs {
		if c.targets[b.Name] != nil {
			continue
		}
		t := c.newTarget(b)
		c.addLocked(t)
		added = append(added, t)
	}
	if !c.started || c.stopped {
		return
	}
	starts, step := startGrid(len(added), c.cfg.Interval)
	for _, t := range added {
		c.startLocked(t, time.Duration(1+c.randN(starts))*step, true)
	}
}

// Remove stops checking the backend named like b: its loop ends, a probe in
// flight is cancelled, its kept connection is closed, and no transition of
// it is reported once Remove has returned.
func (c *Checker) Remove(b *backend.Backend) {
	c.mu.Lock()
	t := c.targets[b.Name]
	if t != nil {
		c.dropLocked(b.Name, t)
	}
	c.mu.Unlock()
	if t == nil {
		return
	}
	c.retire(t)
}

// retire stops a target that is no longer in c.targets.
func (c *Checker) retire(t *target) {
	t.mu.Lock()
	t.removed = true
	t.mu.Unlock()
	if t.cancel != nil {
		t.cancel()
		<-t.done
	}
	if t.close != nil {
		t.close()
	}
	c.givePlace(t)
}

// Set makes bs the checked backends, matched by name (the first of each
// name): new ones are added, missing ones removed, and the others keep
// their run of passes and failures, following the new Backend value when
// reload built one.
func (c *Checker) Set(bs []*backend.Backend) {
	want := make(map[string]*backend.Backend, len(bs))
	for _, b := range bs {
		if want[b.Name] == nil {
			want[b.Name] = b
		}
	}
	c.mu.Lock()
	var gone []*target
	for name, t := range c.targets {
		if b := want[name]; b != nil {
			t.follow(b)
			continue
		}
		gone = append(gone, t)
		c.dropLocked(name, t)
	}
	c.mu.Unlock()
	for _, t := range gone {
		c.retire(t)
	}
	c.add(bs)
}

// follow makes b the target's backend value. A new value starts healthy,
// whatever the checks have found: it takes on the old value's verdict, so
// a backend that is down stays out across a reload instead of coming back
// until its next probe, and its run of passes still has to reach Rise. No
// transition is reported: the backend's state has not changed.
func (t *target) follow(b *backend.Backend) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b != t.b {
		b.SetHealthy(t.b.Healthy())
		t.b = b
	}
}

// Stop cancels the loops and any probe in flight, returns once every loop
// has exited, and closes the connections probes kept. It is safe to call
// more than once, and before Run.
func (c *Checker) Stop() {
	c.mu.Lock()
	c.started, c.stopped = true, true // a Run after Stop must not start loops nobody will stop
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	c.loops.Wait()
	for _, t := range c.list() {
		if t.close != nil {
			t.close()
		}
		c.givePlace(t)
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
	if !c.takePlace(t) {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	start := time.Now()
	err := t.probe(pctx)
	took := time.Since(start)
	cancel()
	if t.kept == nil || !t.kept() {
		// Nothing kept (a probe that never keeps, a backend that
		// refused the connection or closed it): no descriptor to hold
		// a place for. Only this target's loop probes it, so nothing
		// is kept behind this look's back.
		c.givePlace(t)
	}
	if ctx.Err() != nil {
		return // the checker is stopping: the failure is ours, not the backend's
	}
	if fds.IsExhaustion(err) {
		c.noPlace(t, err) // relay's shortage, not the backend's failure
		return
	}
	t.backend().Checks.Observe(err == nil, took)
	c.record(t, err, rise, fall)
}

// record counts one result and flips the backend when a threshold is reached.
// The state is the backend's own condition, not a copy kept here, so a
// transition is reported only when it really changed (with several
// processes, the supervisor's feed sets the same condition).
func (c *Checker) record(t *target, err error, rise, fall int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.removed {
		return
	}
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
