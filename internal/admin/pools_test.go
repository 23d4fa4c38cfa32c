package admin

import (
	"context"
	"net/url"
	"testing"

	"relay/internal/control"
	"relay/internal/supervisor"
)

// twoPools makes the test control hold two pools: default (poolURLs) and
// api, which holds poolURLs[0] too and one address of its own.
func twoPools(t *testing.T, a *testAdmin) {
	t.Helper()
	ms := []supervisor.Member{
		{Pool: "default", URL: poolURLs[0], Weight: 1}, {Pool: "default", URL: poolURLs[1], Weight: 1},
		{Pool: "api", URL: poolURLs[0], Weight: 1}, {Pool: "api", URL: "http://127.0.0.1:8003", Weight: 2},
	}
	pools := []control.PoolRules{{Name: "default", Algorithm: "round-robin", MaxEjectedPercent: 50}, {Name: "api", Algorithm: "least-conn", MaxEjectedPercent: 50}}
	if _, err := a.ctl.Reloaded(supervisor.ConfigSource{Generation: 2}, pools, ms, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// memberState is a member as the control holds it, or nil.
func memberState(a *testAdmin, pool, name string) *control.MemberStatus {
	for _, m := range a.ctl.Status(context.Background()).Members {
		if m.Pool == pool && m.URL == name {
			return &m
		}
	}
	return nil
}

// TestPoolRoutesActWithinTheirPool: /api/pools lists every pool with its
// members; /api/pools/{pool}/backends acts on the pool named, with the
// statuses of /api/backends, which stays the default pool's. An address
// in two pools is drained in one of them only.
func TestPoolRoutesActWithinTheirPool(t *testing.T) {
	a := newAdmin(t, Options{})
	twoPools(t, a)
	json := []string{"Content-Type", "application/json"}
	shared := url.PathEscape(poolURLs[0])

	got := a.call(t, "GET", "/api/pools", "")
	pools, _ := got.body["pools"].([]any)
	if got.code != 200 || len(pools) != 2 {
		t.Fatalf("GET /api/pools: %d %s", got.code, got.short())
	}
	for i, want := range []struct {
		name, algorithm string
		members         int
	}{{"default", "round-robin", 2}, {"api", "least-conn", 2}} {
		p := pools[i].(map[string]any)
		if bs, _ := p["backends"].([]any); p["pool"] != want.name || p["algorithm"] != want.algorithm || len(bs) != want.members {
			t.Errorf("pool %d: %v %v with %d backends; want %s %s with %d", i, p["pool"], p["algorithm"], len(bs), want.name, want.algorithm, want.members)
		}
	}
	if got := a.call(t, "GET", "/api/backends", ""); got.body["pool"] != "default" || len(got.body["backends"].([]any)) != 2 {
		t.Errorf("GET /api/backends: %s; want the default pool", got.short())
	}

	for _, c := range []struct {
		method, path, body string
		code               int
	}{
		{"POST", "/api/pools/api/backends/" + shared + "/drain", "", 200},
		{"PATCH", "/api/pools/api/backends/127.0.0.1:8003", `{"weight": 4}`, 200},
		{"PATCH", "/api/pools/api/backends/127.0.0.1:8003", `{"state": "disable"}`, 200},
		{"PATCH", "/api/pools/api/backends/127.0.0.1:8003", `{"state": "sideways"}`, 400},
		{"PATCH", "/api/pools/api/backends/127.0.0.1:8003", `{}`, 400},
		{"POST", "/api/pools/api/backends/127.0.0.1:8003/weight", `{"weight": 0}`, 400},
		{"POST", "/api/pools/api/backends", `{"url": "http://127.0.0.1:8004"}`, 201},
		{"POST", "/api/pools/api/backends", `{"url": "http://127.0.0.1:8004"}`, 409},
		{"DELETE", "/api/pools/api/backends/127.0.0.1:8004", "", 200},
		{"DELETE", "/api/pools/api/backends/127.0.0.1:8004", "", 404},
		{"POST", "/api/pools/api/backends/127.0.0.1:8002/drain", "", 404}, // default's, not api's
		{"POST", "/api/pools/api/backends/" + shared + "/sideways", "", 404},
		{"GET", "/api/pools/nope/backends", "", 404},
		{"POST", "/api/pools/nope/backends", `{"url": "http://127.0.0.1:8005"}`, 404},
		{"POST", "/api/pools/nope/backends/" + shared + "/drain", "", 404},
		{"DELETE", "/api/pools/nope/backends/" + shared, "", 404},
	} {
		if got := a.call(t, c.method, c.path, c.body, json...); got.code != c.code {
			t.Errorf("%s %s %s: %d %s; want %d", c.method, c.path, c.body, got.code, got.short(), c.code)
		}
	}
	if m := memberState(a, "api", poolURLs[0]); m == nil || !m.State.Draining {
		t.Errorf("api's %s: %+v; want draining", poolURLs[0], m)
	}
	if m := memberState(a, "default", poolURLs[0]); m == nil || m.State.Draining {
		t.Errorf("default's %s: %+v; want it left alone", poolURLs[0], m)
	}
	if m := memberState(a, "api", "http://127.0.0.1:8003"); m == nil || m.Weight != 4 || !m.State.Disabled {
		t.Errorf("api's 8003: %+v; want weight 4, disabled", m)
	}
	if m := memberState(a, "api", "http://127.0.0.1:8004"); m != nil {
		t.Errorf("api's 8004 is still there after its removal: %+v", m)
	}
	if got := a.call(t, "GET", "/api/pools/nope/backends", ""); got.code != 404 || got.errorText() == "" {
		t.Errorf("an unknown pool: %d %s; want 404 naming it", got.code, got.short())
	}
}

// TestCrossSitePoolChangesAreRefused: a page on another site cannot
// change a pool through its routes, whichever way it sends.
func TestCrossSitePoolChangesAreRefused(t *testing.T) {
	a := newAdmin(t, Options{})
	twoPools(t, a)
	path := "/api/pools/api/backends/" + url.PathEscape(poolURLs[0]) + "/drain"
	for _, fields := range [][]string{
		{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"},
		{"Content-Type", "application/json", "Origin", "http://attacker.test"},
		{"Content-Type", "text/plain"},
	} {
		if got := a.call(t, "POST", path, "", fields...); got.code != 403 && got.code != 415 {
			t.Errorf("POST %s with %q: %d %s; want it refused", path, fields, got.code, got.short())
		}
	}
	if m := memberState(a, "api", poolURLs[0]); m == nil || m.State.Draining {
		t.Errorf("a cross-site request drained api's %s", poolURLs[0])
	}
}
