package proxy

import (
	"log/slog"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/testlog"
)

// visit is one request as a backend saw it: when it arrived and when the
// backend finished with it (just before writing the answer).
type visit struct{ arrived, done time.Time }

// timedBackend fails its first fail requests with 503 and answers the
// rest with its name; every request takes delay and is recorded.
type timedBackend struct {
	*httpBackend
	mu     sync.Mutex
	visits []visit
}

func newTimedBackend(t *testing.T, name string, fail int, delay time.Duration) *timedBackend {
	rb := &timedBackend{}
	rb.httpBackend = newHTTPBackend(t, name, 1, func(w http.ResponseWriter, r *http.Request) {
		v := visit{arrived: time.Now()}
		time.Sleep(delay)
		v.done = time.Now()
		rb.mu.Lock()
		rb.visits = append(rb.visits, v)
		n := len(rb.visits)
		rb.mu.Unlock()
		if n <= fail {
			w.WriteHeader(503)
			return
		}
		w.Write([]byte(name))
	})
	return rb
}

// seen returns the first n visits in order of arrival, every visit with
// n < 0, or nil while fewer than n have finished.
func (rb *timedBackend) seen(n int) []visit {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if n < 0 {
		n = len(rb.visits)
	}
	if len(rb.visits) < n {
		return nil
	}
	vs := slices.Clone(rb.visits)
	slices.SortFunc(vs, func(a, b visit) int { return a.arrived.Compare(b.arrived) })
	return vs[:n]
}

// A backend that answers 503 while its health checks would pass: after
// breaker_failures requests it gets none for the open time, then exactly
// one probe request at a time; a failed probe doubles the open time and a
// good one closes the breaker, so it takes its share again. Each
// transition is logged once.
//
// The timings are read where they happen, at the backend, so a client
// that stalls on a busy machine only makes the gaps longer, never shorter.
func TestBreakerEjectsABackendAnsweringErrorsAndProbesItBack(t *testing.T) {
	const open = 300 * time.Millisecond
	// Requests 1-3 open the breaker, 4 is a probe that fails, 5 a probe
	// that succeeds.
	bad := newTimedBackend(t, "bad", 4, 20*time.Millisecond)
	good := newHTTPBackend(t, "good", 1, nil)
	var logs testlog.Buffer
	cfg := withDefaults(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cfg.Pool.BreakerFailures = 3
	cfg.Pool.BreakerStatuses = []int{503}
	cfg.Pool.BreakerOpenTime = open
	cfg.Pool.Retries = 0
	r := startRelayExactly(t, cfg, bad.b, good.b)
	cl := newClient(t, 8, "")

	// One client at a time until the third 503: round robin sends every
	// other request to bad.
	for i := 0; bad.seen(3) == nil; i++ {
		if i > 10 {
			t.Fatalf("bad saw fewer than 3 requests in %d", i)
		}
		get(t, cl, r.url+"/")
	}
	// relay judges an attempt once its answer is on its way to the
	// client, so the client may read the third 503 a moment before.
	eventually(t, "three 503s in a row opening the breaker", bad.b.Ejected)

	// Eight clients hammer relay until the second probe has been answered
	// (bounded: the two open times are under a second).
	var wg sync.WaitGroup
	var wrong atomic.Int64
	stop := time.Now().Add(10 * time.Second)
	for range 8 {
		wg.Go(func() {
			for bad.seen(5) == nil && time.Now().Before(stop) {
				res := get(t, cl, r.url+"/")
				if res.status != 200 && !(res.status == 503 && res.backend == "bad") {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	vs := bad.seen(5)
	if vs == nil {
		t.Fatalf("bad saw fewer than 5 requests in 10 s")
	}
	if n := wrong.Load(); n != 0 {
		t.Errorf("%d answers neither 200 nor bad's 503", n)
	}
	if gap := vs[3].arrived.Sub(vs[2].done); gap < open || gap > open+time.Second {
		t.Errorf("first probe %v after the third failure, want the open time %v (and not much more)", gap, open)
	}
	if gap := vs[4].arrived.Sub(vs[3].done); gap < 2*open || gap > 2*open+time.Second {
		t.Errorf("second probe %v after the first failed, want twice the open time, %v", gap, 2*open)
	}
	// A probe is alone: nothing else reached bad while one was in flight
	// (the sixth request arrives only once the fifth has closed the breaker).
	all := bad.seen(-1)
	for _, p := range []int{3, 4} {
		for i, v := range all {
			if i != p && v.arrived.Before(all[p].done) && all[p].arrived.Before(v.done) {
				t.Errorf("request %d overlapped probe %d at bad", i+1, p+1)
			}
		}
	}
	for _, line := range []string{"circuit breaker opened", "circuit breaker reopened", "circuit breaker closed"} {
		if n := logs.Count(line); n != 1 {
			t.Errorf("%d %q lines, want 1; logs:\n%s", n, line, logs.String())
		}
	}
	if bad.b.Ejected() {
		t.Fatal("bad still ejected after a good probe")
	}
	seen := map[string]int{}
	for range 10 {
		seen[get(t, cl, r.url+"/").backend]++
	}
	if seen["bad"] != 5 || seen["good"] != 5 {
		t.Errorf("after closing: %v, want 5 each", seen)
	}
}

// With two of three backends failing and max_ejected_percent 50, breakers
// hold out at most one: the other keeps its share (and its errors) rather
// than leave one backend with everything.
func TestBreakersEjectAtMostMaxEjectedPercent(t *testing.T) {
	a := newTimedBackend(t, "a", math.MaxInt, 0)
	b := newTimedBackend(t, "b", math.MaxInt, 0)
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
