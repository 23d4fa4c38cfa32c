package control

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/health"
	"relay/internal/stats"
	"relay/internal/supervisor"
)

// hostsOf is a serving process's data plane as far as membership goes:
// one Host per address across the pools, a Backend per member.
func hostsOf(t *testing.T, held *sync.Map) Plane {
	return planeFunc(func(ms []supervisor.Member) []*backend.Backend {
		out := make([]*backend.Backend, len(ms))
		hosts := map[string]*backend.Host{}
		held.Range(func(_, b any) bool {
			hosts[b.(*backend.Backend).Name] = b.(*backend.Backend).Host
			return true
		})
		for i, m := range ms {
			if b, ok := held.Load(memberKey{m.Pool, m.URL}); ok {
				out[i] = b.(*backend.Backend)
				hosts[m.URL] = out[i].Host
				continue
			}
			h := hosts[m.URL]
			if h == nil {
				nb := newBackends(t, m.URL)[0]
				h = nb.Host
				hosts[m.URL] = h
			}
			b, err := h.Member(m.Pool, m.Weight)
			if err != nil {
				t.Error(err)
			}
			held.Store(memberKey{m.Pool, m.URL}, b)
			out[i] = b
		}
		return out
	})
}

// member is the backend of pool and url a process holds.
func member(held *sync.Map, pool, url string) *backend.Backend {
	b, ok := held.Load(memberKey{pool, url})
	if !ok {
		return nil
	}
	return b.(*backend.Backend)
}

// realChecks starts real active checks, as relay does, and counts the
// checkers started and the targets each was handed.
type realChecks struct {
	mu      sync.Mutex
	started []health.Config
	targets [][]*backend.Backend
}

func (r *realChecks) start(cfg health.Config, targets []*backend.Backend, onChange func(*backend.Backend, bool)) (Checker, error) {
	r.mu.Lock()
	r.started = append(r.started, cfg)
	r.targets = append(r.targets, targets)
	r.mu.Unlock()
	c, err := health.New(cfg, targets, onChange)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout+time.Second)
	c.CheckAll(ctx)
	cancel()
	c.Run(context.Background())
	return c, nil
}

// TestOneAddressInTwoPoolsIsCheckedOnceAndEjectedInBoth: two pools that
// check one address alike share one probe of it, once per interval, and
// its verdict; a pool that checks it at another path has its own probe.
// The address's breaker, opened by a request of one pool, holds it out of
// both pools, in the control and in every process.
func TestOneAddressInTwoPoolsIsCheckedOnceAndEjectedInBoth(t *testing.T) {
	var healthHits, statusHits atomic.Int64
	var failing atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			healthHits.Add(1)
			if failing.Load() {
				w.WriteHeader(http.StatusInternalServerError)
			}
		case "/status":
			statusHits.Add(1)
		}
	}))
	defer srv.Close()
	shared, other := srv.URL, "http://127.0.0.1:1" // other is never up; only shared is probed for real
	const interval = 100 * time.Millisecond
	check := health.Config{Type: health.TypeHTTP, Path: "/health", Interval: interval, Timeout: time.Second, Rise: 1, Fall: 1}
	status := check
	status.Path = "/status"
	checks := &realChecks{}
	ctl, err := New(Options{
		Source: supervisor.ConfigSource{Generation: 1},
		Pools: []PoolRules{
			{Name: "web", MaxEjectedPercent: 100, Check: check},
			{Name: "api", MaxEjectedPercent: 100, Check: check},
		},
		Members: []supervisor.Member{
			{Pool: "web", URL: shared, Weight: 1},
			{Pool: "api", URL: shared, Weight: 1},
			{Pool: "api", URL: other, Weight: 1},
		},
		StartChecks: checks.start,
		Log:         slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.StopChecks()
	checks.mu.Lock()
	if len(checks.started) != 1 || len(checks.targets[0]) != 2 {
		t.Errorf("%d checkers started with %d targets; want one checker of the two addresses", len(checks.started), len(checks.targets[0]))
	}
	checks.mu.Unlock()

	// One probe of the shared address per interval, not one per pool.
	start, before := time.Now(), healthHits.Load()
	time.Sleep(10 * interval)
	hits, took := healthHits.Load()-before, time.Since(start)
	if most := int64(took/interval) + 2; hits > most {
		t.Errorf("%d probes of the shared address in %v, want at most %d: one per interval, whichever pools hold it", hits, took, most)
	}
	if hits < 1 {
		t.Errorf("no probe of the shared address in %v", took)
	}

	// Two processes following the control.
	var held [2]sync.Map
	var procs [2]*supervisor.Process
	for i := range held {
		procs[i] = attachProcess(t, ctl, i)
		if err := Follow(procs[i], hostsOf(t, &held[i]), Updates{Stats: func() *stats.Process { return &stats.Process{} }}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range held {
		if member(&held[i], "web", shared).Host != member(&held[i], "api", shared).Host {
			t.Fatal("a process holds two addresses for one URL")
		}
	}

	// A third pool checks the address at /status: a probe of its own.
	if _, err := ctl.Reloaded(supervisor.ConfigSource{Generation: 2}, []PoolRules{
		{Name: "web", MaxEjectedPercent: 100, Check: check},
		{Name: "api", MaxEjectedPercent: 100, Check: check},
		{Name: "admin", MaxEjectedPercent: 100, Check: status},
	}, []supervisor.Member{
		{Pool: "web", URL: shared, Weight: 1},
		{Pool: "api", URL: shared, Weight: 1},
		{Pool: "api", URL: other, Weight: 1},
		{Pool: "admin", URL: shared, Weight: 1},
	}, nil, nil); err != nil {
		t.Fatal(err)
	}
	checks.mu.Lock()
	if len(checks.started) != 2 || checks.started[1].Path != "/status" {
		t.Errorf("checkers started: %+v; want a second one, at /status", checks.started)
	}
	checks.mu.Unlock()
	waitFor(t, "a probe at /status", func() bool { return statusHits.Load() > 0 })

	// The shared address fails /health: down in web and api, in the
	// control and in both processes; admin checks /status, which passes.
	failing.Store(true)
	up := func(pool string) bool {
		for _, m := range ctl.Status(context.Background()).Members {
			if m.Pool == pool && m.URL == shared {
				return m.State.Healthy
			}
		}
		t.Fatalf("no member %s in pool %s", shared, pool)
		return false
	}
	waitFor(t, "the shared address down in web and api, up in admin", func() bool {
		for i := range held {
			if member(&held[i], "web", shared).Healthy() || member(&held[i], "api", shared).Healthy() || !member(&held[i], "admin", shared).Healthy() {
				return false
			}
		}
		return !up("web") && !up("api") && up("admin")
	})
	failing.Store(false)
	waitFor(t, "the shared address back up", func() bool {
		return member(&held[0], "web", shared).Healthy() && member(&held[1], "api", shared).Healthy() && up("web") && up("api")
	})

	// Process 0's web pool opens the shared address's breaker.
	p0 := member(&held[0], "web", shared)
	until := time.Now().Add(time.Minute)
	p0.Trip()
	p0.Eject(until)
	ReportBreaker(procs[0], "web")(p0, until, "3 failures in a row")
	waitFor(t, "the address ejected in every pool of every process and of the control", func() bool {
		for i := range held {
			for _, pool := range []string{"web", "api", "admin"} {
				if member(&held[i], pool, shared).Available() {
					return false
				}
			}
		}
		for _, m := range ctl.Status(context.Background()).Members {
			if m.URL == shared && m.State.EjectedUntil.IsZero() {
				return false
			}
		}
		return true
	})
	if other := member(&held[1], "api", other); other.Ejected() {
		t.Error("another address of api was ejected too")
	}
}

// TestMaxEjectedIsEachPools: a breaker opening is bounded by the
// max_ejected_percent of the pool that reported it, over that pool's
// members only: pool a, with half its members out, refuses another;
// pool b, none of whose members are out, opens one though three of the
// four addresses would then be out.
func TestMaxEjectedIsEachPools(t *testing.T) {
	bs := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003", "http://127.0.0.1:8004")
	l := NewControl(supervisor.ConfigSource{Generation: 1}, nil, 50, slog.New(slog.DiscardHandler))
	ms := []supervisor.Member{
		{Pool: "a", URL: bs[0].Name, Weight: 1}, {Pool: "a", URL: bs[1].Name, Weight: 1},
		{Pool: "b", URL: bs[2].Name, Weight: 1}, {Pool: "b", URL: bs[3].Name, Weight: 1},
	}
	pools := []PoolRules{{Name: "a", MaxEjectedPercent: 50}, {Name: "b", MaxEjectedPercent: 50}}
	if _, err := l.Reloaded(supervisor.ConfigSource{Generation: 2}, pools, ms, nil, nil); err != nil {
		t.Fatal(err)
	}
	var held sync.Map
	p := attachProcess(t, l, 0)
	if err := Follow(p, hostsOf(t, &held), Updates{Stats: func() *stats.Process { return &stats.Process{} }}); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Minute)
	open := func(pool, url string) {
		b := member(&held, pool, url)
		ReportBreaker(p, pool)(b, until, "3 failures in a row")
	}
	ejected := func() string {
		var out []string
		for _, m := range l.Status(context.Background()).Members {
			if !m.State.EjectedUntil.IsZero() {
				out = append(out, m.URL[len(m.URL)-4:])
			}
		}
		return strings.Join(out, " ")
	}
	open("a", bs[0].Name) // 1 of a's 2: 50%, allowed
	waitFor(t, "8001 ejected", func() bool { return ejected() == "8001" })
	open("a", bs[1].Name) // 2 of a's 2: refused
	open("b", bs[2].Name) // 1 of b's 2: allowed, whatever a holds out
	waitFor(t, "8003 ejected too", func() bool { return strings.Contains(ejected(), "8003") })
	// The verdicts come in order: the refusal of 8002 came before 8003's.
	if got := ejected(); got != "8001 8003" {
		t.Errorf("ejected: %s; want 8001 (a's bound allows one) and 8003 (b's own bound)", got)
	}
	if member(&held, "a", bs[1].Name).Ejected() {
		t.Error("the process ejected 8002, which a's bound refused")
	}
}
