package control

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/supervisor"
)

// TestConcurrentChangesEndWithEveryChange: admin calls arrive on
// concurrent connections; every one lands, and the checks end with the
// targets of the final membership, not of a change that finished late.
func TestConcurrentChangesEndWithEveryChange(t *testing.T) {
	l := NewControl(supervisor.ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 50, slog.New(slog.DiscardHandler))
	var mu sync.Mutex
	var last []*backend.Backend
	l.startChecks = recordChecks(func(bs []*backend.Backend) {
		mu.Lock()
		last = bs
		mu.Unlock()
	})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if _, err := l.Add("default", fmt.Sprintf("http://127.0.0.1:%d", 9000+i), 1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(l.members) != 21 || len(last) != 21 {
		t.Fatalf("%d members and %d check targets after 20 concurrent adds, want 21 and 21", len(l.members), len(last))
	}
	if _, err := l.Add("default", "http://127.0.0.1:9000", 1); err == nil {
		t.Fatal("adding a backend twice succeeded")
	}
	if err := l.SetWeight("default", "http://127.0.0.1:9000", 0); err == nil {
		t.Fatal("weight 0 accepted")
	}
	if err := l.Remove("default", "http://127.0.0.1:9999"); err == nil {
		t.Fatal("removing an unknown backend succeeded")
	}
	if len(l.members) != 21 {
		t.Fatalf("bad calls changed the membership: %d members", len(l.members))
	}
}

// TestReloadChangingMaxRequestsKeepsTheBackend: a reload that changes only
// a backend's request cap changes it in place. The backend, the same one
// the checks probe, keeps its health, breaker, operator state and
// counters, and a process attached afterwards is told all of it with the
// new cap.
func TestReloadChangingMaxRequestsKeepsTheBackend(t *testing.T) {
	bs := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002")
	l := NewControl(supervisor.ConfigSource{Generation: 1}, bs, 100, slog.New(slog.DiscardHandler))
	var targets []*backend.Backend
	l.startChecks = recordChecks(func(bs []*backend.Backend) { targets = bs })
	x := bs[0]
	x.SetHealthy(false)
	x.SetDisabled(true)
	x.Eject(time.Now().Add(time.Minute))
	x.Checks.Observe(false, time.Millisecond)
	ms := []supervisor.Member{{Pool: "default", URL: x.Name, Weight: 1, MaxRequests: 10}, {Pool: "default", URL: bs[1].Name, Weight: 1}}
	if _, err := l.Reloaded(supervisor.ConfigSource{Generation: 2}, defaultPool(100), ms, nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(targets) != 2 || targets[0].Host != x.Host {
		t.Fatalf("the checks were handed %v; want the same backend %s, not a new one", targets, x.Name)
	}
	if x.MaxRequests() != 10 {
		t.Errorf("the backend's cap is %d after the reload, want 10", x.MaxRequests())
	}
	m := l.Status(context.Background()).Members[0]
	if m.MaxRequests != 10 || !m.State.Disabled || m.State.Healthy || m.State.EjectedUntil.IsZero() || m.Checks.Failed != 1 {
		t.Errorf("after the reload the control holds %+v; want max_requests 10, disabled, down, ejected, its failed check counted", m)
	}

	p := attachProcess(t, l, 0)
	want := []supervisor.Kind{supervisor.KindMembership, supervisor.KindHealth, supervisor.KindBreaker, supervisor.KindOperator}
	for _, k := range want {
		m, err := p.Recv()
		if err != nil || m.Kind != k {
			t.Fatalf("a process attached after the reload got %+v, %v; want a %q message", m, err, k)
		}
		switch k {
		case supervisor.KindMembership:
			if m.Membership[0].MaxRequests != 10 {
				t.Errorf("membership %+v, want max_requests 10 for %s", m.Membership, x.Name)
			}
		case supervisor.KindHealth:
			if m.Health.Backends[0].Up {
				t.Errorf("a process attached after the reload is told %s is up", x.Name)
			}
		case supervisor.KindOperator:
			if !m.Operator.Disabled {
				t.Errorf("a process attached after the reload is told %+v", m.Operator)
			}
		}
	}
}
