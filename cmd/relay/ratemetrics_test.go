package main

import (
	"fmt"
	"testing"
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
			_, no := getLimited(t, r, path, n)
			return float64(no)
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
