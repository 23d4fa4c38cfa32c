package main

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Each route's requests are counted by route name and status class, and
// the requests relay answers without a pool (no route, a redirect) under
// pool "": exact over the processes, as every counter is.
func TestRouteMetricsCountRelayAsAWhole(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		bs := newBackends(t, 2)
		cfg := fmt.Sprintf(`processes: %d
access_log: false
pools:
  a:
    backends: [%s]
  b:
    backends: [%s]
routes:
  - name: to-a
    match: {path_prefix: /a}
    pool: a
  - name: to-b
    match: {path_prefix: /b}
    pool: b
  - name: moved
    match: {path: /old}
    redirect: {path: /new}
`, processes, bs[0].url, bs[1].url)
		_, started := startRelay(t, "", "-config", writeConfig(t, cfg))
		r := &relay{addr: "127.0.0.1:" + portOf(t, started.Str("listen"))}
		admin := adminOf(t, started)
		send := func(n int, path string, want int) {
			for range n {
				// A new connection for each: the kernel spreads them
				// over the processes.
				c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second,
					CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
				resp, err := c.Get(r.url(path))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Fatalf("GET %s: %d, want %d", path, resp.StatusCode, want)
				}
			}
		}
		send(40, "/a/x", 200)
		send(20, "/b", 200)
		send(7, "/old", 302)
		send(9, "/elsewhere", 404)
		m := scrape(t, admin)
		for _, c := range []struct {
			metric string
			labels []string
			want   float64
		}{
			{"relay_route_requests_total", []string{`route="to-a"`, `code="2xx"`}, 40},
			{"relay_route_requests_total", []string{`route="to-b"`, `code="2xx"`}, 20},
			{"relay_route_requests_total", []string{`route="moved"`, `code="3xx"`}, 7},
			{"relay_route_requests_total", nil, 67},
			{"relay_requests_total", []string{`pool="a"`}, 40},
			{"relay_requests_total", []string{`pool="b"`}, 20},
			{"relay_requests_total", []string{`pool=""`, `backend="none"`, `code="3xx"`}, 7},
			{"relay_requests_total", []string{`pool=""`, `backend="none"`, `code="4xx"`}, 9},
		} {
			if got := sumOf(m, c.metric, c.labels...); got != c.want {
				t.Errorf("%s%v = %v, want %v", c.metric, c.labels, got, c.want)
			}
		}
	})
}
