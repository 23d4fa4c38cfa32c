//go:build linux

package proxy

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// One of three backends hangs: it reads requests and never answers, and
// with breakers off it keeps its share. For 3 s, 40 keep-alive clients
// load relay: every request the hanging backend gets ends in 504 within
// response_timeout + 1 s, the backend sees each of those connections
// closed, and no request the other two answer waits behind the hang: each
// takes well under response_timeout, which such a wait would last. The
// healthy answers' p99 is logged; cmd/relay's
// TestHangingBackendGives504AndSparesOthers bounds it at 50 ms, running
// before the parallel tests, where this test runs beside other packages
// whose load moves a p99 but not a 400 ms bound.
func TestHangingBackendGives504AndSparesTheOthers(t *testing.T) {
	const (
		respTimeout = 500 * time.Millisecond
		clients     = 40
		run         = 3 * time.Second
	)
	hang := newHangingBackend(t)
	a, b := newHTTPBackend(t, "a", 1, nil), newHTTPBackend(t, "b", 1, nil)
	cfg := withDefaults(Config{})
	cfg.Pool.ResponseTimeout = respTimeout
	cfg.Pool.BreakerFailures = 0
	r := startRelayExactly(t, cfg, newBackendFor(t, hang.ln.Addr().String(), 1), a.b, b.b)

	var (
		mu        sync.Mutex
		fast      []time.Duration // answered by a or b
		timeouts  []time.Duration // 504s
		others    []string
		timedOut  []time.Time
		wg        sync.WaitGroup
		stopAfter = time.Now().Add(run)
	)
	for range clients {
		wg.Go(func() {
			cl := newClient(t, 1, "")
			for time.Now().Before(stopAfter) {
				start := time.Now()
				res := get(t, cl, r.url+"/")
				d := time.Since(start)
				mu.Lock()
				switch {
				case res.status == http.StatusOK && (res.backend == "a" || res.backend == "b"):
					fast = append(fast, d)
				case res.status == http.StatusGatewayTimeout:
					timeouts = append(timeouts, d)
					timedOut = append(timedOut, time.Now())
				default:
					others = append(others, fmt.Sprintf("%d from %q", res.status, res.backend))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	if len(others) > 0 {
		t.Errorf("%d answers other than 200 from a healthy backend or 504: %v", len(others), others[:min(5, len(others))])
	}
	if len(timeouts) == 0 || len(fast) == 0 {
		t.Fatalf("%d timeouts and %d fast answers; the load should give both", len(timeouts), len(fast))
	}
	slices.Sort(timeouts)
	if worst := timeouts[len(timeouts)-1]; timeouts[0] < respTimeout || worst > respTimeout+time.Second {
		t.Errorf("504s came after %v to %v, want between response_timeout (%v) and a second more", timeouts[0], worst, respTimeout)
	}
	slices.Sort(fast)
	p99 := fast[len(fast)*99/100]
	t.Logf("%d fast answers, p50 %v, p99 %v; %d 504s after %v to %v", len(fast), fast[len(fast)/2], p99, len(timeouts), timeouts[0], timeouts[len(timeouts)-1])
	if worst := fast[len(fast)-1]; worst >= respTimeout*4/5 {
		t.Errorf("a healthy backend's answer took %v beside a hanging backend, want under %v: it waited behind the hang", worst, respTimeout*4/5)
	}
	// The hanging backend sees the connection of every 504 closed, within
	// a second of the client getting it.
	lastTimeout := slices.MaxFunc(timedOut, time.Time.Compare)
	eventually(t, "the hanging backend seeing every connection closed", func() bool {
		opened, closed := hang.counts()
		return opened == len(timeouts) && len(closed) == opened
	})
	_, closed := hang.counts()
	if late := slices.MaxFunc(closed, time.Time.Compare).Sub(lastTimeout); late > time.Second {
		t.Errorf("the hanging backend saw its last connection closed %v after the last 504", late)
	}
	expectNoneInFlight(t, r)
}
