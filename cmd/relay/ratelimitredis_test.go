package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"relay/internal/redistest"
)

// TestRateLimitInRedisHoldsForInstances: three relay instances (one of
// them with two serving processes) keep two limits' buckets in one Redis
// (store: redis); clients far over the limits on all three for 10 s get
// burst + rate × 10 s through in all, within 10%, not three times that.
func TestRateLimitInRedisHoldsForInstances(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	bs := newBackends(t, 1)
	// A second for Redis's answers, so that only a Redis that is down
	// counts as down on a machine loaded by the tests beside this one.
	var relays []*relay
	for _, processes := range []int{1, 2, 1} {
		cfg := limitsFile(processes, bs[0].url, "redis", fmt.Sprintf("redis: {address: %q, timeout: 1s}\n", srv.Addr()))
		r, _ := startRelay(t, "", "-config", writeConfig(t, cfg))
		relays = append(relays, r)
	}
	counts, elapsed := pressLimits(t, relays, 10*time.Second)
	checkLimits(t, "3 instances", counts, elapsed)
}

// TestRateLimitStoreDownAndBack: when Redis goes away under load, a limit
// with on_store_error: allow lets every request through, one with deny
// refuses every one and one with local goes on limiting in relay's own
// buckets; each serving process says so once; when Redis comes back, they
// limit through Redis again by themselves, and each process says so once.
func TestRateLimitStoreDownAndBack(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	bs := newBackends(t, 1)
	cfg := fmt.Sprintf(`processes: 2
access_log: false
backends: [%s]
redis: {address: %q, timeout: 1s}
routes:
  - name: open
    match: {path: /open}
    pool: default
    rate_limit: {rate: 5, burst: 5, key: route, store: redis}
  - name: closed
    match: {path: /closed}
    pool: default
    rate_limit: {rate: 5, burst: 5, key: route, store: redis, on_store_error: deny}
  - name: local
    match: {path: /local}
    pool: default
    rate_limit: {rate: 5, burst: 5, key: route, store: redis, on_store_error: local}
`, bs[0].url, srv.Addr())
	r, _ := startRelay(t, "", "-config", writeConfig(t, cfg))
	// round sends 20 requests to path, each on a connection of its own
	// so that both processes serve, and returns how many passed.
	round := func(path string) int {
		passed, _ := getLimited(t, r, path, 20)
		return passed
	}
	// until runs rounds until cond holds of the two paths' passes.
	until := func(what string, cond func(open, closed int) bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			open, closed := round("/open"), round("/closed")
			if cond(open, closed) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 15s (last round: %d and %d of 20 passed)\n%s", what, open, closed, r.stdout.text())
			}
		}
	}
	logged := func(msg string) int {
		n := 0
		for _, l := range r.logs() {
			if strings.HasPrefix(l.Msg(), msg) {
				n++
			}
		}
		return n
	}
	waitLogged := func(msg string, want int) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for logged(msg) < want && time.Now().Before(deadline) {
			round("/open")
			round("/closed")
		}
		if n := logged(msg); n != want {
			t.Fatalf("%q logged %d times, want %d, once by each process\n%s", msg, n, want, r.stdout.text())
		}
	}

	until("both limits refuse while Redis is up", func(open, closed int) bool { return open < 20 && closed < 20 })

	srv.Stop()
	until("open passes everything, closed refuses everything, while Redis is down",
		func(open, closed int) bool { return open == 20 && closed == 0 })
	waitLogged("rate limit store unreachable", 2)
	// local keeps limiting, in the buckets the processes share: 20
	// requests in a row find at most its burst and what refilled.
	for range 2 {
		if passed := round("/local"); passed == 0 || passed == 20 {
			t.Errorf("local while Redis is down: %d of 20 passed, want some but not all", passed)
		}
		time.Sleep(time.Second) // some refill for the next round
	}

	srv.Start()
	until("both limit again once Redis is back", func(open, closed int) bool { return open < 20 && closed > 0 })
	waitLogged("rate limit store reachable again", 2)
	// Traffic through the whole outage and recovery: still one line
	// each, however many requests met the store down.
	round("/open")
	if n := logged("rate limit store unreachable"); n != 2 {
		t.Errorf("%q logged %d times, want 2", "rate limit store unreachable", n)
	}
}
