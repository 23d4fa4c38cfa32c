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

// TestRateLimitHoldsForRelayAsAWhole: clients far over two limits for
// 10 s, over HTTP/1.1 and h2c connections that land on every process,
// get burst + rate × 10 s through each, within 10%, with processes: 2 as
// with one: the processes share the buckets, so the limit is relay's,
// not each process's.
func TestRateLimitHoldsForRelayAsAWhole(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		bs := newBackends(t, 1)
		cfg := fmt.Sprintf(`processes: %d
access_log: false
h2c: true
backends: [%s]
routes:
  - name: client
    match: {path: /client}
    pool: default
    rate_limit: {rate: 40, burst: 10, key: client}
  - name: whole
    match: {path_prefix: /whole}
    pool: default
    rate_limit: {rate: 30, burst: 20, key: route}
`, processes, bs[0].url)
		r, _ := startRelay(t, "", "-config", writeConfig(t, cfg))
		const window = 10 * time.Second
		type count struct{ ok, refused atomic.Int64 }
		counts := map[string]*count{"/client": {}, "/whole/x": {}}
		var wg sync.WaitGroup
		start := time.Now()
		deadline := start.Add(window)
		for i := range 16 {
			path := "/client"
			if i%2 == 1 {
				path = "/whole/x"
			}
			n := counts[path]
			wg.Go(func() {
				// One connection each: with several processes, the
				// kernel spreads them over all.
				tr := &http.Transport{MaxIdleConnsPerHost: 1}
				if i%4 >= 2 {
					tr.Protocols = new(http.Protocols)
					tr.Protocols.SetUnencryptedHTTP2(true)
				}
				defer tr.CloseIdleConnections()
				c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
				for time.Now().Before(deadline) {
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
		wg.Wait()
		elapsed := time.Since(start).Seconds()
		for path, l := range map[string]struct{ rate, burst float64 }{"/client": {40, 10}, "/whole/x": {30, 20}} {
			n := counts[path]
			want := l.burst + l.rate*elapsed
			got := float64(n.ok.Load())
			t.Logf("processes=%d %s: %v allowed and %d refused in %.1fs, the limit allows %.0f", processes, path, got, n.refused.Load(), elapsed, want)
			if n.refused.Load() < int64(want) {
				t.Errorf("%s: only %d refused; the clients did not press the limit", path, n.refused.Load())
			}
			if got > want*1.1 || got < want*0.9 {
				t.Errorf("%s: %v requests allowed in %.1fs, want %.0f within 10%%", path, got, elapsed, want)
			}
		}
	})
}
