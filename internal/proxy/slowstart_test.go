package proxy

import (
	"sync"
	"testing"
	"time"
)

// A backend that returns to rotation with slow_start set takes a share that
// rises over the window: measured in thirds of it, each third gives it more
// than the one before, starting well below its full share and ending near
// it. Round robin and least-conn alike.
func TestSlowStartRampsAReturningBackendsShare(t *testing.T) {
	const window = 1500 * time.Millisecond
	for _, alg := range []string{"round-robin", "least-conn"} {
		t.Run(alg, func(t *testing.T) {
			a := newHTTPBackend(t, "a", 1, nil)
			b := newHTTPBackend(t, "b", 1, nil)
			c := newHTTPBackend(t, "c", 1, nil)
			cfg := withDefaults(Config{})
			cfg.Pool.Algorithm = alg
			cfg.Pool.SlowStart = window
			r := startRelayExactly(t, cfg, backendsOf(a, b, c)...)
			cl := newClient(t, 4, "")
			c.b.SetHealthy(false)
			c.b.SetHealthy(true) // back in rotation: the ramp starts
			start := time.Now()
			var mu sync.Mutex
			var total, toC [3]int
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for {
						res := get(t, cl, r.url+"/")
						third := int(time.Since(start) * 3 / window)
						if third >= 3 {
							return
						}
						mu.Lock()
						total[third]++
						if res.backend == "c" {
							toC[third]++
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			var share [3]float64
			for i := range share {
				share[i] = float64(toC[i]) / float64(total[i])
			}
			t.Logf("c's share by third of the window: %.3f %.3f %.3f (of %v requests); full share 0.333", share[0], share[1], share[2], total)
			if !(share[0] < share[1] && share[1] < share[2]) {
				t.Errorf("share did not rise third by third: %.3f %.3f %.3f", share[0], share[1], share[2])
			}
			if share[0] > 0.2 || share[2] < 0.2 {
				t.Errorf("share %.3f in the first third and %.3f in the last, want a small start (< 0.2) and near full (> 0.2) at the end", share[0], share[2])
			}
			// After the window c is at its full share.
			seen := map[string]int{}
			for range 300 {
				seen[get(t, cl, r.url+"/").backend]++
			}
			if seen["c"] < 80 {
				t.Errorf("after the window c got %d of 300, want about 100", seen["c"])
			}
		})
	}
}
