package main

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// limitsFile is a configuration of two routes over backend, each with a
// rate limit far below what clients send: /client by client address (40
// a second, burst 10) and /whole as a whole (30 a second, burst 20), with
// store: as given (memory or redis) and any other keys in extra.
func limitsFile(processes int, backend, store, extra string) string {
	return fmt.Sprintf(`processes: %d
access_log: false
h2c: true
backends: [%s]
%sroutes:
  - name: client
    match: {path: /client}
    pool: default
    rate_limit: {rate: 40, burst: 10, key: client, store: %s}
  - name: whole
    match: {path_prefix: /whole}
    pool: default
    rate_limit: {rate: 30, burst: 20, key: route, store: %s}
`, processes, backend, extra, store, store)
}

// limitsAllow are what limitsFile's limits let through, by path.
var limitsAllow = map[string]struct{ rate, burst float64 }{"/client": {40, 10}, "/whole/x": {30, 20}}

// tally counts a path's answers.
type tally struct{ ok, refused atomic.Int64 }

// pressLimits sends requests to both of limitsFile's paths on every relay
// from 8 clients per relay for window, each 50 a second on a connection of
// its own (a quarter of them h2c): with several processes the kernel
// spreads the connections over all of them. It returns the answers by
// path and how long the clients took.
func pressLimits(t *testing.T, relays []*relay, window time.Duration) (map[string]*tally, float64) {
	counts := map[string]*tally{"/client": {}, "/whole/x": {}}
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(window)
	for _, r := range relays {
		for i := range 8 {
			path := "/client"
			if i%2 == 1 {
				path = "/whole/x"
			}
			n := counts[path]
			wg.Go(func() {
				tr := &http.Transport{MaxIdleConnsPerHost: 1}
				if i%4 >= 2 {
					tr.Protocols = new(http.Protocols)
					tr.Protocols.SetUnencryptedHTTP2(true)
				}
				defer tr.CloseIdleConnections()
				c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
				// 50 requests a second each, 200 a second per path and
				// relay: five times the limits, without taking both
				// cores from the tests that run beside this one.
				next := time.Now()
				for time.Now().Before(deadline) {
					next = next.Add(20 * time.Millisecond)
					time.Sleep(time.Until(next))
					resp, err := c.Get(r.url(path))
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					switch resp.StatusCode {
					case 200:
						n.ok.Add(1)
					case 429:
						n.refused.Add(1)
					default:
						t.Errorf("GET %s: %d", path, resp.StatusCode)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return counts, time.Since(start).Seconds()
}

// checkLimits checks that each path let through burst + rate × elapsed
// requests, within 10%, and refused at least as many.
func checkLimits(t *testing.T, what string, counts map[string]*tally, elapsed float64) {
	t.Helper()
	for path, l := range limitsAllow {
		n := counts[path]
		want := l.burst + l.rate*elapsed
		got := float64(n.ok.Load())
		t.Logf("%s %s: %v allowed and %d refused in %.1fs, the limit allows %.0f", what, path, got, n.refused.Load(), elapsed, want)
		if n.refused.Load() < int64(want) {
			t.Errorf("%s %s: only %d refused; the clients did not press the limit", what, path, n.refused.Load())
		}
		if got > want*1.1 || got < want*0.9 {
			t.Errorf("%s %s: %v requests allowed in %.1fs, want %.0f within 10%%", what, path, got, elapsed, want)
		}
	}
}

// TestRateLimitHoldsForRelayAsAWhole: clients far over two limits for
// 10 s, over HTTP/1.1 and h2c connections that land on every process,
// get burst + rate × 10 s through each, within 10%, with processes: 2 as
// with one: the processes share the buckets, so the limit is relay's,
// not each process's.
func TestRateLimitHoldsForRelayAsAWhole(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		bs := newBackends(t, 1)
		r, _ := startRelay(t, "", "-config", writeConfig(t, limitsFile(processes, bs[0].url, "memory", "")))
		counts, elapsed := pressLimits(t, []*relay{r}, 10*time.Second)
		checkLimits(t, fmt.Sprintf("processes=%d", processes), counts, elapsed)
	})
}

// getLimited sends n GETs of path to r, each on a connection of its own
// (so that every serving process takes some), and returns how many got
// 200 and how many 429; any other answer fails t.
func getLimited(t *testing.T, r *relay, path string, n int) (passed, refused int) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for range n {
		resp, err := c.Get(r.url(path))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			passed++
		case 429:
			refused++
		default:
			t.Fatalf("GET %s: %d, want 200 or 429", path, resp.StatusCode)
		}
	}
	return passed, refused
}
