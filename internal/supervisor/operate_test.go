package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
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

// TestReloadChangingMaxRequestsKeepsTheBackend: a reload that changes only
// a backend's request cap changes it in place. The backend, the same one
// the checks probe, keeps its health, breaker, operator state and
// counters, and a process attached afterwards is told all of it with the
// new cap.
func TestReloadChangingMaxRequestsKeepsTheBackend(t *testing.T) {
	bs := newBackends(t, "http://127.0.0.1:8001", "http://127.0.0.1:8002")
	l := NewControl(ConfigSource{Generation: 1}, bs, 100, slog.New(slog.DiscardHandler))
	var targets []*backend.Backend
	l.SetTargets(func(bs []*backend.Backend) { targets = bs })
	x := bs[0]
	x.SetHealthy(false)
	x.SetDisabled(true)
	x.Eject(time.Now().Add(time.Minute))
	x.Checks.Observe(false, time.Millisecond)
	ms := []Member{{URL: x.Name, Weight: 1, MaxRequests: 10}, {URL: bs[1].Name, Weight: 1}}
	if err := l.Reloaded(ConfigSource{Generation: 2}, ms, 100, nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(targets) != 2 || targets[0] != x {
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
	want := []Kind{KindMembership, KindHealth, KindBreaker, KindOperator}
	for _, k := range want {
		m, err := p.ch.Recv()
		if err != nil || m.Kind != k {
			t.Fatalf("a process attached after the reload got %+v, %v; want a %q message", m, err, k)
		}
		switch k {
		case KindMembership:
			if m.Membership[0].MaxRequests != 10 {
				t.Errorf("membership %+v, want max_requests 10 for %s", m.Membership, x.Name)
			}
		case KindHealth:
			if m.Health.Backends[0].Up {
				t.Errorf("a process attached after the reload is told %s is up", x.Name)
			}
		case KindOperator:
			if !m.Operator.Disabled {
				t.Errorf("a process attached after the reload is told %+v", m.Operator)
			}
		}
	}
}

// TestDiscoveredMembersJoinBesideTheFile: etcd's set is laid beside the
// file's and the API's members; the file wins a clash; an operator's
// weight holds until etcd announces another; an etcd member cannot be
// removed through the API; a reload keeps the discovered members.
func TestDiscoveredMembersJoinBesideTheFile(t *testing.T) {
	l := NewControl(ConfigSource{Generation: 1}, newBackends(t, "http://127.0.0.1:8001"), 100, slog.New(slog.DiscardHandler))
	l.SetTargets(func([]*backend.Backend) {})
	if _, err := l.Add("http://127.0.0.1:8002", 1); err != nil {
		t.Fatal(err)
	}
	etcd := func(url string, weight int) Member {
		return Member{URL: url, Weight: weight, From: FromEtcd, Key: "/relay/backends/" + url[len(url)-4:]}
	}
	members := func() string {
		var s string
		for _, m := range l.members {
			s += fmt.Sprintf("%s=%d/%s ", m.URL[len(m.URL)-4:], m.Weight, m.Source())
		}
		return s
	}
	expect := func(want string) {
		t.Helper()
		if got := members(); got != want {
			t.Fatalf("members %q, want %q", got, want)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Discovered([]Member{etcd("http://127.0.0.1:8001", 5), etcd("http://127.0.0.1:8003", 2), etcd("http://127.0.0.1:8004", 1)}))
	expect("8001=1/file 8002=1/api 8003=2/etcd 8004=1/etcd ")

	must(l.SetWeight("http://127.0.0.1:8003", 7))
	must(l.Discovered([]Member{etcd("http://127.0.0.1:8003", 2), etcd("http://127.0.0.1:8004", 3)}))
	expect("8001=1/file 8002=1/api 8003=7/etcd 8004=3/etcd ")
	must(l.Discovered([]Member{etcd("http://127.0.0.1:8003", 4), etcd("http://127.0.0.1:8004", 3)}))
	expect("8001=1/file 8002=1/api 8003=4/etcd 8004=3/etcd ")

	if err := l.Remove("http://127.0.0.1:8004"); err == nil || !errors.Is(err, ErrConflict) {
		t.Fatalf("removing an etcd member through the API: %v, want a conflict naming its key", err)
	}
	must(l.Reloaded(ConfigSource{Generation: 2}, []Member{{URL: "http://127.0.0.1:8005", Weight: 1}}, 100, nil, nil))
	expect("8005=1/file 8003=4/etcd 8004=3/etcd ")
	must(l.Discovered([]Member{etcd("http://127.0.0.1:8004", 3)}))
	expect("8005=1/file 8004=3/etcd ")
	must(l.Discovered(nil))
	expect("8005=1/file ")
}
