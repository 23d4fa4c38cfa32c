package core

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// The pool's policies, tested against the core itself through a fake front
// door (door_test.go) over real backend sockets.

// A backend answering a status counted as a failure is ejected after
// breaker_failures of them in a row and gets no request while open; once
// the open time is over one probe goes through, and its success closes the
// breaker.
func TestBreakerEjectsAndProbesBack(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	flaky := serving(t, "flaky", func(w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			w.WriteHeader(500)
		}
		fmt.Fprint(w, "flaky")
	})
	good := serving(t, "good", nil)
	pc := testPool()
	pc.BreakerFailures, pc.BreakerStatuses, pc.BreakerOpenTime = 2, []int{500}, 100*time.Millisecond
	c, _ := startPool(t, pc, flaky.b, good.b)
	for i := 0; !flaky.b.Ejected(); i++ {
		if i == 10 {
			t.Fatal("the backend answering 500 was not ejected after 10 requests")
		}
		send(c, "GET", "")
	}
	before := flaky.hits.Load()
	for i := range 10 {
		if r := send(c, "GET", ""); r.status != 200 || r.backend != "good" {
			t.Fatalf("request %d with the breaker open: %d from %q, want 200 from good", i, r.status, r.backend)
		}
	}
	if !flaky.b.Ejected() || flaky.hits.Load() != before {
		t.Fatal("the ejected backend got requests before its open time was over")
	}
	failing.Store(false)
	eventually(t, "a probe to close the breaker", func() bool {
		send(c, "GET", "")
		return !flaky.b.Ejected()
	})
	seen := map[string]int{}
	for range 10 {
		seen[send(c, "GET", "").backend]++
	}
	if seen["flaky"] != 5 || seen["good"] != 5 {
		t.Errorf("after the breaker closed the requests went %v, want half each", seen)
	}
}

// Breakers never hold out more than max_ejected_percent of the members:
// with two of three failing and 50%, one is ejected and the other stays.
func TestBreakersEjectAtMostMaxEjectedPercent(t *testing.T) {
	fail := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }
	x, y, good := serving(t, "x", fail), serving(t, "y", fail), serving(t, "good", nil)
	pc := testPool()
	pc.BreakerFailures, pc.BreakerStatuses = 2, []int{500}
	c, _ := startPool(t, pc, x.b, y.b, good.b)
	for range 30 {
		send(c, "GET", "")
	}
	if n := btoi(x.b.Ejected()) + btoi(y.b.Ejected()); n != 1 || good.b.Ejected() {
		t.Errorf("ejected: x %v, y %v, good %v; want exactly one of x and y", x.b.Ejected(), y.b.Ejected(), good.b.Ejected())
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// With every backend at its request limit a request waits in the queue and
// is served when a place frees; past the queue's length a request is
// refused at once, and one that waits past queue_timeout gets 503 too,
// both with Retry-After.
func TestQueueHoldsTheExcess(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 8)
	slow := serving(t, "slow", func(w http.ResponseWriter, _ *http.Request) {
		arrived <- struct{}{}
		<-release
		fmt.Fprint(w, "slow")
	})
	pc := testPool()
	pc.MaxRequests, pc.MaxQueued, pc.QueueTimeout = 1, 1, 5*time.Second
	c, p := startPool(t, pc, slow.b)
	results := make(chan reply, 2)
	go func() { results <- send(c, "GET", "") }()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the first request did not reach the backend")
	}
	go func() { results <- send(c, "GET", "") }()
	eventually(t, "the second request to queue", func() bool { return p.Queued() == 1 })
	r := send(c, "GET", "")
	if r.status != 503 || r.body != "Service Unavailable: every backend is at its request limit and the queue is full\n" || r.retryAfter != RetryAfter {
		t.Errorf("past the queue: %d %q (Retry-After %q), want 503 at once", r.status, r.body, r.retryAfter)
	}
	close(release)
	for range 2 {
		select {
		case r := <-results:
			if r.status != 200 || r.body != "slow" {
				t.Errorf("held or queued request: %d %q, want 200", r.status, r.body)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a held or queued request was not answered")
		}
	}
	if n := slow.hits.Load(); n != 2 {
		t.Errorf("the backend took %d requests, want 2", n)
	}
}

func TestQueueTimeoutGives503(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	slow := serving(t, "slow", func(http.ResponseWriter, *http.Request) {
		arrived <- struct{}{}
		<-release
	})
	defer close(release)
	pc := testPool()
	pc.MaxRequests, pc.QueueTimeout = 1, 100*time.Millisecond
	c, _ := startPool(t, pc, slow.b)
	go send(c, "GET", "")
	<-arrived
	r := send(c, "GET", "")
	if r.status != 503 || r.body != "Service Unavailable: every backend is at its request limit: queue timeout\n" || r.retryAfter != RetryAfter {
		t.Errorf("queued past queue_timeout: %d %q (Retry-After %q), want 503", r.status, r.body, r.retryAfter)
	}
	if r.took < 100*time.Millisecond {
		t.Errorf("answered after %v, before queue_timeout", r.took)
	}
}

// A backend coming back into rotation with slow_start set gets a small
// share at first; at the end of the ramp it has its full share. A pool
// whose only backend is warming serves every request from it.
func TestSlowStartPassesByAWarmingBackend(t *testing.T) {
	a, b, back := serving(t, "a", nil), serving(t, "b", nil), serving(t, "back", nil)
	pc := testPool()
	pc.SlowStart = time.Hour
	c, _ := startPool(t, pc, a.b, b.b, back.b)
	back.b.SetHealthy(false)
	back.b.SetHealthy(true) // back in rotation: the ramp starts
	count := func() int {
		n := 0
		for range 300 {
			if r := send(c, "GET", ""); r.backend == "back" {
				n++
			}
		}
		return n
	}
	if n := count(); n > 30 {
		t.Errorf("at the start of the ramp the returning backend got %d of 300, want about 10%% of its 100", n)
	}
	back.b.Returned(time.Now().Add(-pc.SlowStart)) // the ramp is over
	if n := count(); n < 90 {
		t.Errorf("after the ramp the returning backend got %d of 300, want its full 100", n)
	}

	pc.SlowStart = time.Hour
	c, _ = startPool(t, pc, back.b)
	back.b.SetHealthy(false)
	back.b.SetHealthy(true)
	for i := range 20 {
		if r := send(c, "GET", ""); r.status != 200 || r.backend != "back" {
			t.Fatalf("request %d with the only backend warming: %d from %q", i, r.status, r.backend)
		}
	}
}

// With every backend failing, retries stay within the budget: a fifth of
// the requests, plus the floor each second and the burst the bank starts
// with, instead of two per request. Retries that fail are not refunded.
func TestBudgetBoundsRetriesWhenEveryBackendFails(t *testing.T) {
	x, y, z := resetting(t), resetting(t), resetting(t)
	pc := testPool()
	pc.BreakerFailures = 0 // all stay in rotation
	c, p := startPool(t, pc, x.b, y.b, z.b)
	const requests = 300
	start := time.Now()
	for i := range requests {
		if r := send(c, "GET", ""); r.status != 502 {
			t.Fatalf("request %d: %d %q, want 502", i, r.status, r.body)
		}
	}
	seconds := int64(time.Since(start)/time.Second) + 1
	retries := x.hits.Load() + y.hits.Load() + z.hits.Load() - requests
	bound := requests*20/100 + 3*seconds + budgetBurst
	t.Logf("%d retries for %d requests in %v (bound %d, without a budget %d)", retries, requests, time.Since(start), bound, 2*requests)
	if retries > bound || retries < requests*20/100 {
		t.Errorf("%d retries for %d requests, want %d to %d", retries, requests, requests*20/100, bound)
	}
	if got := int64(p.retries.Load()); got != retries {
		t.Errorf("the pool counts %d retries, the backends saw %d", got, retries)
	}
}

// With no backend in rotation the pool panics and balances over every
// member an operator has not taken out; once one is back, requests go to it
// alone. With every member drained there is nothing to try: 503 at once.
func TestPanicBalancesOverBackendsOutOfRotation(t *testing.T) {
	a, b := serving(t, "a", nil), serving(t, "b", nil)
	c, p := startPool(t, testPool(), a.b, b.b)
	a.b.SetHealthy(false)
	b.b.SetHealthy(false)
	seen := map[string]int{}
	for range 10 {
		r := send(c, "GET", "")
		if r.status != 200 {
			t.Fatalf("in panic: %d %q, want 200 from a backend that answers", r.status, r.body)
		}
		seen[r.backend]++
	}
	if seen["a"] == 0 || seen["b"] == 0 || !p.panicking.Load() {
		t.Errorf("in panic the requests went %v (panicking %v), want both backends used", seen, p.panicking.Load())
	}
	a.b.SetHealthy(true)
	for range 6 {
		if r := send(c, "GET", ""); r.backend != "a" {
			t.Fatalf("with a back in rotation a request went to %q", r.backend)
		}
	}
	if p.panicking.Load() {
		t.Error("the pool still panics with a backend in rotation")
	}
	a.b.SetDraining(true)
	b.b.SetDraining(true)
	hits := a.hits.Load() + b.hits.Load()
	r := send(c, "GET", "")
	if r.status != 503 || r.body != "Service Unavailable: no backend available\n" || r.retryAfter != RetryAfter {
		t.Errorf("every backend drained: %d %q (Retry-After %q), want 503", r.status, r.body, r.retryAfter)
	}
	if a.hits.Load()+b.hits.Load() != hits {
		t.Error("a drained backend was sent a request")
	}
}
