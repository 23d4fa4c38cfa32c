package proxy

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// failingBackend answers 503 while failing is set, after delay, and records
// the most requests it ever had in flight at once while failing.
type failingBackend struct {
	*httpBackend
	failing  atomic.Bool
	inFlight atomic.Int64
	maxSeen  atomic.Int64
}

func newFailingBackend(t *testing.T, name string, delay time.Duration) *failingBackend {
	fb := &failingBackend{}
	fb.failing.Store(true)
	fb.httpBackend = newHTTPBackend(t, name, 1, func(w http.ResponseWriter, r *http.Request) {
		if !fb.failing.Load() {
			w.Write([]byte(name))
			return
		}
		n := fb.inFlight.Add(1)
		defer fb.inFlight.Add(-1)
		for {
			m := fb.maxSeen.Load()
			if n <= m || fb.maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(delay)
		w.WriteHeader(503)
	})
	return fb
}

// syncBuffer is a log destination tests read while relay writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

// A backend that answers 503 to everything while its health checks would
// pass: after breaker_failures requests it gets none for the open time,
// then exactly one probe request at a time, each failed probe doubling
// the open time; once it answers 200 the probe closes the breaker and it
// takes its share again. Each transition is logged once.
func TestBreakerEjectsABackendAnsweringErrorsAndProbesItBack(t *testing.T) {
	const open = 400 * time.Millisecond
	bad := newFailingBackend(t, "bad", 20*time.Millisecond)
	good := newHTTPBackend(t, "good", 1, nil)
	var logs syncBuffer
	cfg := withDefaults(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cfg.Pool.BreakerFailures = 3
	cfg.Pool.BreakerStatuses = []int{503}
	cfg.Pool.BreakerOpenTime = open
	cfg.Pool.Retries = 0
	r := startRelayExactly(t, cfg, bad.b, good.b)
	cl := newClient(t, 8, "")

	// Round robin: every other request goes to bad until its third 503.
	for i := 0; bad.hits.Load() < 3; i++ {
		if i > 10 {
			t.Fatalf("bad got %d requests in %d", bad.hits.Load(), i)
		}
		get(t, cl, r.url+"/")
	}
	// relay judges an attempt once its answer is on its way to the
	// client, so the client may read the third 503 a moment before.
	eventually(t, "three 503s in a row opening the breaker", bad.b.Ejected)
	opened := time.Now()
	for time.Since(opened) < open*3/4 {
		if res := get(t, cl, r.url+"/"); res.status != 200 || res.backend != "good" {
			t.Fatalf("while open: %d from %q, want 200 from good", res.status, res.backend)
		}
	}
	if n := bad.hits.Load(); n != 3 {
		t.Fatalf("bad got %d requests while its breaker was open, want none after the 3rd", n-3)
	}

	// Half-open under 8 concurrent clients: one probe at a time. The first
	// probe fails and reopens the breaker for twice as long; hammer
	// through 1.5 open times and expect exactly one more probe.
	time.Sleep(open / 4)
	var wg sync.WaitGroup
	stop := time.Now().Add(open * 3 / 2)
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				get(t, cl, r.url+"/")
			}
		})
	}
	wg.Wait()
	if m := bad.maxSeen.Load(); m != 1 {
		t.Errorf("bad had %d requests at once while half-open, want exactly 1", m)
	}
	if n := bad.hits.Load() - 3; n != 1 {
		t.Errorf("bad got %d probe requests in 1.5 open times after its first probe failed, want 1 (the open time doubles)", n)
	}
	if logs.count("circuit breaker reopened") != 1 || logs.count("circuit breaker opened") != 1 {
		t.Errorf("logs:\n%s", logs.b.String())
	}

	// Healthy again: the next probe closes the breaker.
	bad.failing.Store(false)
	eventually(t, "bad back in rotation", func() bool {
		get(t, cl, r.url+"/")
		return !bad.b.Ejected()
	})
	seen := map[string]int{}
	for range 10 {
		seen[get(t, cl, r.url+"/").backend]++
	}
	if seen["bad"] != 5 || seen["good"] != 5 {
		t.Errorf("after closing: %v, want 5 each", seen)
	}
	if logs.count("circuit breaker closed") != 1 {
		t.Errorf("want one \"closed\" line; logs:\n%s", logs.b.String())
	}
}

// With two of three backends failing and max_ejected_percent 50, breakers
// hold out at most one: the other keeps its share (and its errors) rather
// than leave one backend with everything.
func TestBreakersEjectAtMostMaxEjectedPercent(t *testing.T) {
	a := newFailingBackend(t, "a", 0)
	b := newFailingBackend(t, "b", 0)
	c := newHTTPBackend(t, "c", 1, nil)
	cfg := withDefaults(Config{})
	cfg.Pool.BreakerFailures = 2
	cfg.Pool.BreakerStatuses = []int{503}
	cfg.Pool.BreakerOpenTime = time.Minute
	cfg.Pool.MaxEjectedPercent = 50
	cfg.Pool.Retries = 0
	r := startRelayExactly(t, cfg, a.b, b.b, c.b)
	cl := newClient(t, 4, "")
	getConcurrently(t, cl, r.url+"/", 4, 30)
	if a.b.Ejected() == b.b.Ejected() {
		t.Fatalf("ejected: a %v, b %v; want exactly one of them", a.b.Ejected(), b.b.Ejected())
	}
	still := a
	if a.b.Ejected() {
		still = b
	}
	before := still.hits.Load()
	for range 9 {
		get(t, cl, r.url+"/")
	}
	if got := still.hits.Load() - before; got < 3 {
		t.Errorf("the backend left in rotation got %d of 9 requests, want its share", got)
	}
	if c.b.Ejected() {
		t.Error("the good backend was ejected")
	}
}

// An unreachable backend opens its breaker too, and breakers are off with
// breaker_failures 0.
func TestBreakerCountsUnreachableAndCanBeTurnedOff(t *testing.T) {
	for _, failures := range []int{2, 0} {
		good := newHTTPBackend(t, "good", 1, nil)
		dead := newBackendFor(t, deadAddr(t), 1)
		cfg := withDefaults(Config{})
		cfg.Pool.BreakerFailures = failures
		cfg.Pool.Retries = 1
		cfg.Pool.RetryBudgetPercent = 0 // every request meets dead first with breakers off
		r := startRelayExactly(t, cfg, dead, good.b)
		cl := newClient(t, 1, "")
		for range 6 {
			if res := get(t, cl, r.url+"/"); res.status != 200 {
				t.Fatalf("breaker_failures %d: status %d %q: the retry should have reached good", failures, res.status, res.body)
			}
		}
		if dead.Ejected() != (failures > 0) {
			t.Errorf("breaker_failures %d: dead ejected = %v", failures, dead.Ejected())
		}
	}
}
