package main

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// The requests rate limits refuse are counted by pool and route, exact
// over the processes, and match the 429s the clients got.
func TestRateLimitedMetric(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		bs := newBackends(t, 1)
		cfg := fmt.Sprintf(`processes: %d
access_log: false
backends: [%s]
rate_limit: {rate: 1, burst: 2}
routes:
  - name: shared
    match: {path_prefix: /shared}
    pool: default
    rate_limit: {rate: 1, burst: 3, key: route}
`, processes, bs[0].url)
		_, started := startRelay(t, "", "-config", writeConfig(t, cfg))
		r := &relay{addr: "127.0.0.1:" + portOf(t, started.Str("listen"))}
		admin := adminOf(t, started)
		send := func(n int, path string) (refused float64) {
			for range n {
				c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
				resp, err := c.Get(r.url(path))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 429:
					refused++
				case 200:
				default:
					t.Fatalf("GET %s: %d, want 200 or 429", path, resp.StatusCode)
				}
			}
			return refused
		}
		shared := send(20, "/shared")
		pool := send(20, "/x")
		if shared == 0 || pool == 0 {
			t.Fatalf("%v and %v of 20 refused; the limits should refuse some", shared, pool)
		}
		m := scrape(t, admin)
		for _, c := range []struct {
			labels []string
			want   float64
		}{
			{[]string{`pool="default"`, `route="shared"`}, shared},
			{[]string{`pool="default"`, `route=""`}, pool},
		} {
			if got := sumOf(m, "relay_rate_limited_total", c.labels...); got != c.want {
				t.Errorf("relay_rate_limited_total%v = %v, want %v", c.labels, got, c.want)
			}
		}
	})
}
