package main

import (
	"slices"
	"testing"
	"time"

	"relay/internal/testaddr"
)

// Health check settings for these tests, short so transitions come quickly.
// retries: 0 makes a request sent to a dead backend fail visibly instead of
// being quietly retried elsewhere, so only health checks keep traffic away.
const (
	checkInterval = 200 * time.Millisecond
	checkTimeout  = 100 * time.Millisecond
	checkRise     = 2
	checkFall     = 2
	healthYAML    = "health_check_interval: 200ms\nhealth_check_timeout: 100ms\n" +
		"health_check_rise: 2\nhealth_check_fall: 2\nretries: 0\n"
	// slack covers scheduling on two busy cores under the race detector.
	slack = 1500 * time.Millisecond
)

// transition matches relay's log line for backend b going down or up.
func transition(msg string, b string) func(logLine) bool {
	return func(l logLine) bool { return l.Msg() == msg && l.Str("backend") == b }
}

// answeredBy returns the greetings in got that are from backends in bs, in order.
func answeredBy(got []string, bs ...*backendServer) []string {
	var out []string
	for _, body := range got {
		for _, b := range bs {
			if body == b.hello {
				out = append(out, body)
			}
		}
	}
	return out
}

func TestFailingHealthCheckTakesBackendOutAndBack(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 3)
	sick := bs[1]
	r, started := startRelay(t, "", "-config", writeConfig(t, healthYAML+backendsYAML(urlsOf(bs))))
	if started.Num("healthy") != 3 {
		t.Fatalf("started line %v, want 3 healthy backends", started)
	}
	c := newClient(t)

	sick.health.SetFailing(true)
	failedAt := time.Now()
	outWithin := checkFall*checkInterval + checkTimeout
	if _, ok := r.waitLog(outWithin+slack, transition("backend down", sick.url)); !ok {
		t.Fatalf("no \"backend down\" line for %s within %v", sick.url, outWithin+slack)
	}
	t.Logf("out of rotation after %v (bound %v)", time.Since(failedAt), outWithin)
	// /health failing is the only thing wrong with it: GET / still works, so
	// any request reaching it would show.
	got := sequence(t, c, r, 12)
	if n := len(answeredBy(got, sick)); n != 0 {
		t.Fatalf("%d of 12 requests still reached the backend whose health check fails: %q", n, got)
	}
	assertCycle(t, got, []*backendServer{bs[0], bs[2]})

	sick.health.SetFailing(false)
	recoveredAt := time.Now()
	backWithin := checkRise*checkInterval + checkTimeout
	if _, ok := r.waitLog(backWithin+slack, transition("backend up", sick.url)); !ok {
		t.Fatalf("no \"backend up\" line for %s within %v", sick.url, backWithin+slack)
	}
	t.Logf("back in rotation after %v (bound %v)", time.Since(recoveredAt), backWithin)
	assertCycle(t, sequence(t, c, r, 12), bs)

	// Only transitions are logged: one down, one up, however many checks ran.
	var n int
	for _, l := range r.logs() {
		if l.Str("backend") == sick.url && (l.Msg() == "backend down" || l.Msg() == "backend up") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d transition lines for %s, want 2", n, sick.url)
	}
	r.stop()
}

func TestBackendDownAtStartIsNeverPicked(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 2)
	dead := "http://" + testaddr.Refused(t)
	urls := []string{bs[0].url, dead, bs[1].url}
	// A long interval: only the check before serving can have found it.
	r, started := startRelay(t, "", "-config",
		writeConfig(t, "health_check_interval: 1m\nhealth_check_timeout: 1s\nretries: 0\n"+backendsYAML(urls)))
	if started.Num("backends") != 3 || started.Num("healthy") != 2 {
		t.Fatalf("started line %v, want 3 backends of which 2 healthy", started)
	}
	if _, ok := r.waitLog(0, transition("backend down", dead)); !ok {
		t.Errorf("no \"backend down\" line for %s before relay started", dead)
	}
	// Every request succeeds at once, though a pick of the dead backend
	// would be a 502 with retries off.
	assertCycle(t, sequence(t, newClient(t), r, 10), bs)
	r.stop()
}

func TestStoppedBackendLeavesRotation(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 3)
	r, _ := startRelay(t, "", "-config", writeConfig(t, healthYAML+backendsYAML(urlsOf(bs))))
	c := newClient(t)
	assertCycle(t, sequence(t, c, r, 6), bs)

	bs[0].srv.Close()
	outWithin := checkFall*checkInterval + checkTimeout
	if _, ok := r.waitLog(outWithin+slack, transition("backend down", bs[0].url)); !ok {
		t.Fatalf("no \"backend down\" line for %s within %v", bs[0].url, outWithin+slack)
	}
	// The control logs the transition as it sends it to the serving side,
	// which takes it a moment later: wait for a full round of answers.
	for ok, deadline := 0, time.Now().Add(time.Second); ok < 2*len(bs); {
		if code, _ := get(t, c, r.url("/")); code == 200 {
			ok++
		} else {
			ok = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests still fail a second after %s was logged down", bs[0].url)
		}
	}
	got := sequence(t, c, r, 10)
	if slices.Contains(got, bs[0].hello) {
		t.Fatalf("a stopped backend answered: %q", got)
	}
	assertCycle(t, got, bs[1:])
	r.stop()
}
