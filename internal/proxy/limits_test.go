package proxy

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/core"
)

// concurrencyBackend answers after delay and records the most requests it
// had in flight at once.
func concurrencyBackend(t *testing.T, delay time.Duration) (*httpBackend, *atomic.Int64) {
	var inFlight, maxSeen atomic.Int64
	hb := newHTTPBackend(t, "slow", 1, func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := maxSeen.Load()
			if n <= m || maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(delay)
		w.Write([]byte("ok"))
	})
	return hb, &maxSeen
}

// max_requests 2 on a slow backend under 20 concurrent clients: the backend
// never sees more than 2 at once, and the requests that queued succeed.
func TestMaxRequestsQueuesTheExcess(t *testing.T) {
	hb, maxSeen := concurrencyBackend(t, 20*time.Millisecond)
	hb.b.SetMaxRequests(2)
	r := startRelay(t, Config{}, hb.b)
	cl := newClient(t, 20, "")
	statuses := getConcurrently(t, cl, r.url+"/", 20, 3)
	if m := maxSeen.Load(); m != 2 {
		t.Errorf("the backend saw %d requests at once, want at most 2 (and 2 under this load)", m)
	}
	if statuses[200] != 60 {
		t.Errorf("statuses %v, want 60 times 200: every queued request succeeds", statuses)
	}
	expectNoneInFlight(t, r)
}

// With a queue timeout shorter than the wait, the excess gets 503 with
// Retry-After and a body naming the cause, and the backend still never
// sees more than its limit.
func TestQueueTimeoutGives503WithRetryAfter(t *testing.T) {
	hb, maxSeen := concurrencyBackend(t, 300*time.Millisecond)
	cfg := withDefaults(Config{})
	cfg.Pool.MaxRequests = 2
	cfg.Pool.QueueTimeout = 50 * time.Millisecond
	r := startRelayExactly(t, cfg, hb.b)
	cl := newClient(t, 10, "")
	var wg sync.WaitGroup
	results := make(chan result, 10)
	for range 10 {
		wg.Go(func() { results <- get(t, cl, r.url+"/") })
	}
	wg.Wait()
	close(results)
	var served, refused int
	for res := range results {
		switch {
		case res.status == 200:
			served++
		case res.status == 503 && res.header.Get("Retry-After") == core.RetryAfter &&
			res.body == "Service Unavailable: every backend is at its request limit: queue timeout\n":
			refused++
		default:
			t.Errorf("status %d %q Retry-After %q", res.status, res.body, res.header.Get("Retry-After"))
		}
	}
	if served != 2 || refused != 8 {
		t.Errorf("%d served and %d refused, want 2 and 8", served, refused)
	}
	if m := maxSeen.Load(); m > 2 {
		t.Errorf("the backend saw %d requests at once, want at most 2", m)
	}
}

// A queue that is full refuses at once rather than queue without bound.
func TestFullQueueRefusesAtOnce(t *testing.T) {
	hb, _ := concurrencyBackend(t, 300*time.Millisecond)
	cfg := withDefaults(Config{})
	cfg.Pool.MaxRequests = 1
	cfg.Pool.MaxQueued = 1
	r := startRelayExactly(t, cfg, hb.b)
	cl := newClient(t, 3, "")
	var wg sync.WaitGroup
	results := make(chan result, 3)
	for i := range 3 {
		time.Sleep(time.Duration(i) * 30 * time.Millisecond)
		wg.Go(func() { results <- get(t, cl, r.url+"/") })
	}
	start := time.Now()
	wg.Wait()
	close(results)
	statuses := map[int]int{}
	for res := range results {
		statuses[res.status]++
		if res.status == 503 && res.body != "Service Unavailable: every backend is at its request limit and the queue is full\n" {
			t.Errorf("503 body %q", res.body)
		}
	}
	if statuses[200] != 2 || statuses[503] != 1 {
		t.Errorf("statuses %v after %v, want two 200s (one served, one queued) and one 503", statuses, time.Since(start))
	}
}

// With every backend failing, retries stay within the budget: 20% of the
// requests plus the floor per second plus the small burst the earnings
// hold, instead of one retry per request.
func TestRetryBudgetBoundsRetriesWhenEveryBackendFails(t *testing.T) {
	var attempts atomic.Int64
	fail := func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		panic(http.ErrAbortHandler) // the connection drops before any response byte
	}
	a := newHTTPBackend(t, "a", 1, fail)
	b := newHTTPBackend(t, "b", 1, fail)
	c := newHTTPBackend(t, "c", 1, fail)
	cfg := withDefaults(Config{})
	cfg.Pool.Retries = 2
	cfg.Pool.BreakerFailures = 0 // keep every backend in rotation
	cfg.Pool.RetryBudgetPercent = 20
	cfg.Pool.RetryBudgetFloor = 3
	r := startRelayExactly(t, cfg, backendsOf(a, b, c)...)
	cl := newClient(t, 4, "")
	const requests = 400
	start := time.Now()
	if statuses := getConcurrently(t, cl, r.url+"/", 4, requests/4); statuses[502] != requests {
		t.Errorf("statuses %v, want %d times 502", statuses, requests)
	}
	seconds := int64(time.Since(start)/time.Second) + 1
	retries := attempts.Load() - requests
	bound := requests*20/100 + 3*seconds + 10
	t.Logf("%d requests, %d retries in %v (bound %d; without a budget %d)", requests, retries, time.Since(start), bound, 2*requests)
	if retries > bound {
		t.Errorf("%d retries for %d requests, want at most %d", retries, requests, bound)
	}
	if retries < requests*20/100 {
		t.Errorf("%d retries for %d requests: the budget allows %d", retries, requests, requests*20/100)
	}
}
