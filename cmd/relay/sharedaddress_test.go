package main

import (
	"fmt"
	"net/url"
	"testing"
	"time"
)

// sharedRelay is relay with two serving processes and pools a and b that
// hold one address between them: a is shared and a1, b is shared and b1;
// /a routes to a and /b to b. extra goes before the pools.
type sharedRelay struct {
	r              *relay
	admin          string
	file, head     string
	shared, a1, b1 *poolBackend
}

func startSharedRelay(t *testing.T, extra string) *sharedRelay {
	t.Helper()
	s := &sharedRelay{shared: newPoolBackend(t, "shared"), a1: newPoolBackend(t, "a"), b1: newPoolBackend(t, "b")}
	s.head = "listen: 127.0.0.1:0\nlog_level: info\nprocesses: 2\naccess_log: false\nalgorithm: round-robin\n" + extra
	s.file = writeFile(t, t.TempDir(), "relay.yml", s.head+fmt.Sprintf(`pools:
  a:
    backends: %s
  b:
    backends: %s
routes:
  - match: {path_prefix: /a}
    pool: a
  - match: {path_prefix: /b}
    pool: b
`, poolURLs(s.shared, s.a1), poolURLs(s.shared, s.b1)))
	r, started := startRelay(t, "", "-config", s.file)
	s.r, s.admin = r, adminOf(t, started)
	return s
}

// TestSharedAddressCheckedOnceEjectedInBoth: one address in pools a and b
// of a relay with two serving processes is one upstream server. Its
// health check runs once per interval, not once per pool (nor per
// process): it gets no more checks than a backend of one pool. When it
// answers 500 (a breaker status) to requests sent through pool a only,
// its breaker opens and pool b stops sending to it too; both pools' other
// backends take the traffic, and /api/pools and /metrics show it ejected
// in both pools.
func TestSharedAddressCheckedOnceEjectedInBoth(t *testing.T) {
	t.Parallel()
	s := startSharedRelay(t, "health_check_interval: 100ms\nhealth_check_timeout: 50ms\n"+
		"breaker_failures: 3\nbreaker_statuses: [500]\nbreaker_open_time: 1m\nretries: 0\n")

	// Checks over a window, counted from a start both have seen.
	shared0, a10 := s.shared.checks.Load(), s.a1.checks.Load()
	time.Sleep(1500 * time.Millisecond)
	shared, a1 := s.shared.checks.Load()-shared0, s.a1.checks.Load()-a10
	t.Logf("health checks in 1.5 s at 100 ms: %d of the shared address, %d of a backend of one pool", shared, a1)
	if shared < 5 || shared > a1+3 {
		t.Fatalf("the address in two pools got %d health checks while one in one pool got %d: want about the same, at most one per interval", shared, a1)
	}

	// Failures through pool a only, until the breaker opens.
	s.shared.failing.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for {
		freshGet(t, s.r.addr, "/a/fail")
		ma, mb := poolMember(t, s.admin, "a", s.shared.url), poolMember(t, s.admin, "b", s.shared.url)
		if ma["breaker"] == "open" && mb["breaker"] == "open" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failing address's breaker did not open in both pools within 10 s: a %v, b %v", ma, mb)
		}
	}
	for _, pool := range []string{"a", "b"} {
		m := poolMember(t, s.admin, pool, s.shared.url)
		if m["state"] != "ejected" || m["in_rotation"] != false || m["healthy"] != true {
			t.Errorf("pool %s lists the failing address as %v; want ejected, out of rotation, healthy", pool, m)
		}
	}
	// Pool b never sent it a failing request, yet sends it nothing now.
	if got := answersFrom(t, s.r.addr, "/b/x", 30); got[s.shared.port] != 0 || got[s.b1.port] != 30 {
		t.Errorf("pool b answered by %v; want all 30 by %s", got, s.b1.port)
	}
	if got := answersFrom(t, s.r.addr, "/a/x", 30); got[s.shared.port] != 0 || got[s.a1.port] != 30 {
		t.Errorf("pool a answered by %v; want all 30 by %s", got, s.a1.port)
	}
	m := scrape(t, s.admin)
	for _, pool := range []string{"a", "b"} {
		labels := []string{`backend="` + s.shared.url + `"`, `pool="` + pool + `"`}
		if got := sumOf(m, "relay_backend_breaker_state", append(labels, `state="open"`)...); got != 1 {
			t.Errorf(`relay_backend_breaker_state{pool=%q,state="open"} of the shared address = %v, want 1`, pool, got)
		}
		if got := sumOf(m, "relay_backend_in_rotation", labels...); got != 0 {
			t.Errorf("relay_backend_in_rotation{pool=%q} of the shared address = %v, want 0", pool, got)
		}
		if got := sumOf(m, "relay_backend_up", labels...); got != 1 {
			t.Errorf("relay_backend_up{pool=%q} of the shared address = %v, want 1 (its checks pass)", pool, got)
		}
	}
	if got := sumOf(m, "relay_backend_attempts_total", `backend="`+s.shared.url+`"`, `pool="b"`); got != 0 {
		t.Errorf("pool b sent the shared address %v attempts, want none", got)
	}
	s.r.stop()
}

// TestDrainInOnePoolKeepsTheOther: an operator drains the address pools a
// and b share, in pool a only (POST /api/pools/a/backends/{name}/drain,
// relay with two serving processes). Pool a stops sending to it; pool b
// keeps it in rotation and sends it its share. The drain survives a
// reload that reorders the pools and adds a pool c holding the address,
// in which it serves. Enabling it in pool a brings it back there.
func TestDrainInOnePoolKeepsTheOther(t *testing.T) {
	t.Parallel()
	s := startSharedRelay(t, "")
	esc := url.PathEscape(s.shared.url)

	code, v := adminCall(t, s.admin, "POST", "/api/pools/a/backends/"+esc+"/drain", "")
	if code != 200 || v["draining"] != true {
		t.Fatalf("drain in pool a: %d %v", code, v)
	}
	if got := answersFrom(t, s.r.addr, "/a/x", 30); got[s.shared.port] != 0 || got[s.a1.port] != 30 {
		t.Errorf("after the drain pool a answered by %v; want all 30 by %s", got, s.a1.port)
	}
	if got := answersFrom(t, s.r.addr, "/b/x", 30); got[s.shared.port] < 5 || got[s.b1.port] < 5 {
		t.Errorf("after the drain in pool a, pool b answered by %v; want both its backends", got)
	}
	if m := poolMember(t, s.admin, "a", s.shared.url); m["draining"] != true || m["in_rotation"] != false {
		t.Errorf("pool a lists the drained address as %v", m)
	}
	if m := poolMember(t, s.admin, "b", s.shared.url); m["draining"] != false || m["in_rotation"] != true || m["state"] != "up" {
		t.Errorf("pool b lists the address drained in pool a as %v; want up, in rotation", m)
	}
	m := scrape(t, s.admin)
	for pool, want := range map[string]float64{"a": 1, "b": 0} {
		if got := sumOf(m, "relay_backend_operator_state", `backend="`+s.shared.url+`"`, `pool="`+pool+`"`, `state="draining"`); got != want {
			t.Errorf(`relay_backend_operator_state{pool=%q,state="draining"} of the shared address = %v, want %v`, pool, got, want)
		}
	}

	// A reload: pool b first, a pool c with the address, a route to it.
	reloaded := s.head + fmt.Sprintf(`pools:
  b:
    backends: %s
  a:
    backends: %s
  c:
    backends: %s
routes:
  - match: {path_prefix: /a}
    pool: a
  - match: {path_prefix: /b}
    pool: b
  - match: {path_prefix: /c}
    pool: c
`, poolURLs(s.shared, s.b1), poolURLs(s.shared, s.a1), poolURLs(s.shared))
	if err := writeFileAtomic(s.file, reloaded); err != nil {
		t.Fatal(err)
	}
	if code, v := adminCall(t, s.admin, "POST", "/reload", ""); code != 200 {
		t.Fatalf("POST /reload: %d %v", code, v)
	}
	t0 := time.Now()
	awaitAnswers(t, s.r.addr, "/c/x", s.shared.port, 5*time.Second)
	t.Logf("pool c answered 10 requests in a row %v after POST /reload did", time.Since(t0).Round(time.Millisecond))
	if got := answersFrom(t, s.r.addr, "/a/x", 30); got[s.shared.port] != 0 || got[s.a1.port] != 30 {
		t.Errorf("after a reload pool a answered by %v; want the drain kept, all 30 by %s", got, s.a1.port)
	}
	if got := answersFrom(t, s.r.addr, "/b/x", 30); got[s.shared.port] < 5 || got[s.b1.port] < 5 {
		t.Errorf("after a reload pool b answered by %v; want both its backends", got)
	}
	if m := poolMember(t, s.admin, "a", s.shared.url); m["draining"] != true {
		t.Errorf("after a reload pool a lists the drained address as %v", m)
	}
	for _, pool := range []string{"b", "c"} {
		if m := poolMember(t, s.admin, pool, s.shared.url); m["draining"] != false || m["in_rotation"] != true {
			t.Errorf("after a reload pool %s lists the address drained in pool a as %v; want it in rotation", pool, m)
		}
	}

	if code, v := adminCall(t, s.admin, "POST", "/api/pools/a/backends/"+esc+"/enable", ""); code != 200 || v["state"] != "up" {
		t.Fatalf("enable in pool a: %d %v", code, v)
	}
	if got := answersFrom(t, s.r.addr, "/a/x", 30); got[s.shared.port] < 5 {
		t.Errorf("after enabling it again pool a answered by %v; want the address among them", got)
	}
	s.r.stop()
}

// awaitAnswers waits until 10 requests for path in a row, each on a
// connection of its own, are answered 200 by the backend on port.
func awaitAnswers(t *testing.T, addr, path, port string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for n := 0; n < 10; {
		code, body := freshGet(t, addr, path)
		if a, ok := parseAnswer(body); code == 200 && ok && a.port == port {
			n++
			continue
		}
		n = 0
		if time.Now().After(deadline) {
			t.Fatalf("%s not answered by port %s alone within %v: last %d %q", path, port, within, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
