package dataplane

import (
	"testing"

	"relay/internal/config"
	"relay/internal/supervisor"
)

// parse returns the configuration a YAML text gives.
func parse(t testing.TB, yml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yml), "test.yml", config.Options{Algorithms: []string{"round-robin", "least-conn", "ip-hash"}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A membership whose only change is a backend's max_requests keeps that
// backend in the serving process, with its health, operator state and
// counters, and the process enforces its share of the new cap.
func TestMembershipChangesACapInPlace(t *testing.T) {
	cfg := parse(t, "backends:\n  - url: http://127.0.0.1:8001\n    max_requests: 2\n")
	pl, err := New(cfg, Options{Share: func(n int) int { return supervisor.Share(n, 2, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	b := pl.Backends()[0]
	if b.MaxRequests() != 1 {
		t.Fatalf("cap %d at start; want this process's share of 2 (1)", b.MaxRequests())
	}
	b.SetHealthy(false)
	b.SetDraining(true)
	b.Acquire()
	got, err := pl.SetMembers([]supervisor.Member{{Pool: DefaultPool, URL: b.Name, Weight: 3, MaxRequests: 12}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != b || pl.Backends()[0] != b {
		t.Fatalf("the pool holds %v after the change; want the same backend %s", pl.Backends(), b.Name)
	}
	if b.MaxRequests() != 6 || b.EffectiveWeight() != 3 {
		t.Errorf("cap %d and weight %d; want this process's share of 12 (6) and 3", b.MaxRequests(), b.EffectiveWeight())
	}
	if b.Healthy() || !b.Draining() || b.InFlight() != 1 || b.Served() != 1 {
		t.Errorf("the backend's state after the change: %+v, %d in flight, %d served; want down, draining, its request counted",
			b.State(), b.InFlight(), b.Served())
	}
}

// A membership with a URL that is no backend changes nothing and says
// which member is wrong.
func TestMembershipRefusesABadURL(t *testing.T) {
	pl, err := New(parse(t, "backends: [http://127.0.0.1:8001]\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := pl.Backends()[0]
	_, err = pl.SetMembers([]supervisor.Member{{Pool: DefaultPool, URL: "http://", Weight: 1}})
	if err == nil {
		t.Fatal("a member without a host was accepted")
	}
	if bs := pl.Backends(); len(bs) != 1 || bs[0] != before {
		t.Fatalf("a refused membership changed the pool: %v", bs)
	}
}

// An https backend the file lists nowhere (etcd or the admin API added
// it) takes the backend_tls_ settings of its own pool, not the top
// level's.
func TestUnlistedBackendTakesItsPoolsTLS(t *testing.T) {
	cfg := parse(t, `backends: [http://127.0.0.1:8001]
backend_tls_server_name: top.example
pools:
  api:
    backend_tls_server_name: api.example
    backends: [http://127.0.0.1:8002]
`)
	pl, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs, err := pl.SetMembers([]supervisor.Member{
		{Pool: DefaultPool, URL: "https://127.0.0.1:9443", Weight: 1},
		{Pool: "api", URL: "https://127.0.0.1:9444", Weight: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"top.example", "api.example"} {
		if got := bs[i].TLS().ServerName; got != want {
			t.Errorf("%s in pool %s verifies the name %q, want %q", bs[i].Name, bs[i].Pool, got, want)
		}
	}
}
