package dataplane

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"relay/internal/logging"
	"relay/internal/stats"
)

// burstOf sends n requests of one client as fast as it can and returns
// how many got 200 before the first 429, the first 429, and how long the
// requests took. Every request after the first 429 must get 429 too:
// the client is far over its rate.
func burstOf(t *testing.T, send func(testing.TB, string, rawReq) reply, addr string, n int, rq rawReq) (int, reply, time.Duration) {
	t.Helper()
	start := time.Now()
	ok := 0
	var first reply
	for i := range n {
		got := send(t, addr, rq)
		switch {
		case got.status == 200 && first.status == 0:
			ok++
		case got.status == 429 && first.status == 0:
			first = got
		case got.status == 429:
		default:
			t.Fatalf("request %d of %s: %v, want 200 within the burst, then 429", i, rq.target, &got)
		}
	}
	return ok, first, time.Since(start)
}

// withinBurst checks that ok requests passed of a bucket of burst filled
// at rate a second during took: at least the burst, at most what the
// bucket could have held.
func withinBurst(t *testing.T, what string, ok, burst, rate int, took time.Duration) {
	t.Helper()
	most := burst + int(took.Seconds()*float64(rate)) + 1
	if ok < burst || ok > most {
		t.Errorf("%s: %d requests passed in %v; want the burst, %d, and at most %d", what, ok, took, burst, most)
	}
}

// checkRefusal checks a 429's fields: Retry-After the whole seconds until
// a token, RateLimit-Policy the quota (the burst) over the window an
// empty bucket takes to fill, RateLimit the quota left and the wait.
func checkRefusal(t *testing.T, what string, got reply, policy string, retry int) {
	t.Helper()
	if got.status != 429 {
		t.Fatalf("%s: %v, want 429", what, &got)
	}
	name := policy[:strings.IndexByte(policy, ';')]
	want := map[string]string{
		"Retry-After":      fmt.Sprint(retry),
		"Ratelimit-Policy": policy,
		"Ratelimit":        fmt.Sprintf("%s;r=0;t=%d", name, retry),
	}
	for k, v := range want {
		if g := got.header.Get(k); g != v {
			t.Errorf("%s: %s %q, want %q", what, k, g, v)
		}
	}
	if got.seen() != nil {
		t.Errorf("%s: a refused request reached a backend", what)
	}
}

// A client over its rate gets 429 once its burst is spent, with
// Retry-After and the RateLimit fields, while another client passes; the
// client is the address X-Forwarded-For gives behind a trusted proxy.
// Both front doors; the refusals are counted and logged.
func TestRateLimitPerClient(t *testing.T) {
	var buf bytes.Buffer
	log := logging.NewAccessLog(&buf)
	rep, _ := echoes(t, "default")
	r := startRelay(t, rep.Replace(`
trusted_proxies: [127.0.0.1/32]
backends: [$default]
rate_limit: {rate: 1, burst: 3}
`), Options{AccessLog: log})
	refused := 0
	for i, s := range sends {
		a := rawReq{target: "/a", host: "www.example.com", header: [][2]string{{"X-Forwarded-For", fmt.Sprintf("192.0.2.%d", 10+i)}}}
		ok, first, took := burstOf(t, s.send, r.addr, 8, a)
		withinBurst(t, s.proto+" client A", ok, 3, 1, took)
		checkRefusal(t, s.proto+" client A", first, `"pool:default";q=3;w=3`, 1)
		refused += 8 - ok
		// Another client, and the proxy itself, are unaffected.
		for _, xff := range []string{fmt.Sprintf("192.0.2.%d", 20+i), ""} {
			b := rawReq{target: "/b", host: "www.example.com"}
			if xff != "" {
				b.header = [][2]string{{"X-Forwarded-For", xff}}
			}
			if got := s.send(t, r.addr, b); got.status != 200 {
				t.Errorf("%s client %q after A's burst: %v, want 200", s.proto, xff, &got)
			}
		}
	}
	var st stats.Process
	r.plane.Core().Stats(&st)
	if len(st.Limited) != 1 || st.Limited[0] != (stats.Limited{Pool: "default", Route: "", Requests: uint64(refused)}) {
		t.Errorf("refusals counted %+v, want %d of pool default", st.Limited, refused)
	}
	waitFor(t, "the relay's connections to end", func() bool { return r.proxy.Connections() == 0 })
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	logged := 0
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var al accessLine
		if err := json.Unmarshal([]byte(l), &al); err != nil {
			t.Fatalf("access log line %q: %v", l, err)
		}
		if al.Status == 429 {
			logged++
			if al.Pool != "default" || al.Route != "" || al.Backend != "" {
				t.Errorf("a 429's access log line: %+v", al)
			}
		}
	}
	if logged != refused {
		t.Errorf("%d 429s in the access log, want %d", logged, refused)
	}
}

// A route's limit applies first, keyed by a header's value or shared by
// the whole route; the pool's own limit applies after it. A request
// without the header is not limited by a header key.
func TestRateLimitRouteKeys(t *testing.T) {
	rep, _ := echoes(t, "default", "api")
	r := startRelay(t, rep.Replace(`
backends: [$default]
pools:
  api:
    backends: [$api]
    rate_limit: {rate: 1, burst: 4, key: route}
routes:
  - name: keyed
    match: {path_prefix: /keyed}
    pool: default
    rate_limit: {rate: 1, burst: 2, key: "header:X-Api-Key"}
  - name: shared
    match: {path_prefix: /shared}
    pool: default
    rate_limit: {rate: 2, burst: 3, key: route}
  - name: api
    match: {path_prefix: /api}
    pool: api
`), Options{})
	for _, s := range sends {
		// Fresh keys for each door: the buckets outlive the loop.
		k1, k2 := "k1-"+s.proto, "k2-"+s.proto
		keyed := func(key string) rawReq {
			return rawReq{target: "/keyed", host: "h", header: [][2]string{{"X-Api-Key", key}}}
		}
		ok, first, took := burstOf(t, s.send, r.addr, 6, keyed(k1))
		withinBurst(t, s.proto+" key 1", ok, 2, 1, took)
		checkRefusal(t, s.proto+" key 1", first, `"route:keyed";q=2;w=2`, 1)
		if got := s.send(t, r.addr, keyed(k2)); got.status != 200 {
			t.Errorf("%s key 2 after key 1's burst: %v", s.proto, &got)
		}
		for range 5 {
			if got := s.send(t, r.addr, rawReq{target: "/keyed", host: "h"}); got.status != 200 {
				t.Fatalf("%s without the header: %v, want 200", s.proto, &got)
			}
		}
	}
	// The shared bucket: whoever sends, three pass, then 429.
	ok, first, took := burstOf(t, sendH1, r.addr, 4, rawReq{target: "/shared", host: "h"})
	withinBurst(t, "shared", ok, 3, 2, took)
	checkRefusal(t, "shared", first, `"route:shared";q=3;w=2`, 1)
	if got := sendH2(t, r.addr, rawReq{target: "/shared", host: "other", header: [][2]string{{"X-Api-Key", "x"}}}); got.status != 429 {
		t.Errorf("another client on the shared route over HTTP/2: %v, want 429", &got)
	}
	// The api pool's limit, reached through a route that has none.
	ok, first, took = burstOf(t, sendH2, r.addr, 6, rawReq{target: "/api", host: "h"})
	withinBurst(t, "pool api", ok, 4, 1, took)
	checkRefusal(t, "pool api", first, `"pool:api";q=4;w=4`, 1)
	var st stats.Process
	r.plane.Core().Stats(&st)
	st.Sort()
	got := map[string]uint64{}
	for _, l := range st.Limited {
		got[l.Pool+"/"+l.Route] = l.Requests
	}
	if got["default/keyed"] < 8 || got["default/shared"] < 2 || got["api/api"] < 1 || len(got) != 3 {
		t.Errorf("refusals counted %v", got)
	}
}

// A reload that keeps a limit's settings keeps its buckets: a client
// over its rate stays over it; one that changes them starts full.
func TestRateLimitAcrossReload(t *testing.T) {
	rep, _ := echoes(t, "default")
	yml := func(burst int) string {
		return rep.Replace(fmt.Sprintf(`
backends: [$default]
rate_limit: {rate: 1, burst: %d, key: "header:X-K"}
routes:
  - name: r
    match: {path_prefix: /r}
    pool: default
    rate_limit: {rate: 1, burst: %d, key: route}
`, burst, burst))
	}
	r := startRelay(t, yml(2), Options{})
	for _, target := range []string{"/x", "/r"} {
		ok, _, took := burstOf(t, sendH1, r.addr, 4, rawReq{target: target, host: "h", header: [][2]string{{"X-K", target}}})
		withinBurst(t, target, ok, 2, 1, took)
	}
	if err := r.plane.Reconfigure(parse(t, "h2c: true\n"+yml(2))); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/x", "/r"} {
		if got := sendH1(t, r.addr, rawReq{target: target, host: "h", header: [][2]string{{"X-K", target}}}); got.status != 429 {
			t.Errorf("%s after a reload that kept the limit: %v, want 429", target, &got)
		}
	}
	if err := r.plane.Reconfigure(parse(t, "h2c: true\n"+yml(5))); err != nil {
		t.Fatal(err)
	}
	if got := sendH1(t, r.addr, rawReq{target: "/r", host: "h"}); got.status != 200 {
		t.Errorf("/r after a reload that changed the limit: %v, want 200", &got)
	}
}
