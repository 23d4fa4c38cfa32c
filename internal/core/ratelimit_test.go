package core

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/ratelimit"
	"relay/internal/route"
	"relay/internal/stats"
)

// Rate limits of routes and pools (ratelimit.go), through the fake door.

// frozenLimits keeps the buckets of every limit in one table in memory,
// as the core's own do, and takes every token at one moment, so no
// bucket fills again during a test: the counts are exact.
func frozenLimits() func(string, RateLimit) ratelimit.Limiter {
	table, at := ratelimit.NewTable(0), time.Now()
	return func(name string, r RateLimit) ratelimit.Limiter { return frozen{table.Limit(name, r.Spec), at} }
}

type frozen struct {
	ratelimit.Limiter
	at time.Time
}

func (f frozen) Take(key []byte, _ time.Time) ratelimit.Decision { return f.Limiter.Take(key, f.at) }

func limitOf(rate, burst int, key RateKey) *RateLimit {
	return &RateLimit{Spec: ratelimit.Spec{Rate: rate, Burst: burst}, Key: key}
}

// burst sends r n times and returns how many got 200 before the first
// 429, and the first 429. Every request after it must get 429 too.
func burst(t *testing.T, c *Core, n int, r req) (int, reply) {
	t.Helper()
	ok := 0
	var first reply
	for i := range n {
		got := do(c, r)
		switch {
		case got.status == 200 && first.status == 0:
			ok++
		case got.status == 429 && first.status == 0:
			first = got
		case got.status != 429:
			t.Fatalf("request %d of %s: %d %q, want 200 within the burst, then 429", i, r.target, got.status, got.body)
		}
	}
	return ok, first
}

// checkRefusal checks a 429 from relay: no body, Retry-After the whole
// seconds until a token, RateLimit-Policy the quota (the burst) over the
// window an empty bucket takes to fill, RateLimit the quota left and the
// wait.
func checkRefusal(t *testing.T, what string, got reply, policy string, retry int) {
	t.Helper()
	if got.status != 429 || got.body != "" || got.outcome.Backend != nil {
		t.Fatalf("%s: %d %q, want relay's 429 without a body", what, got.status, got.body)
	}
	name := policy[:strings.IndexByte(policy, ';')]
	for k, v := range map[string]string{
		"Retry-After":      fmt.Sprint(retry),
		"Ratelimit-Policy": policy,
		"Ratelimit":        fmt.Sprintf("%s;r=0;t=%d", name, retry),
	} {
		if g := got.header[k]; len(g) != 1 || g[0] != v {
			t.Errorf("%s: %s %q, want [%q]", what, k, g, v)
		}
	}
}

// xff is a request from client behind the trusted proxy 127.0.0.1.
func xff(client string) req { return req{fields: "X-Forwarded-For: " + client + "\r\n"} }

// A client over its pool's rate gets 429 once its burst is spent, with
// Retry-After and the RateLimit fields, and reaches no backend, while
// another client passes; behind a trusted proxy the client is the address
// X-Forwarded-For gives. The refusals are counted and logged, by pool.
// The buckets are the core's own, in memory, on the clock.
func TestRateLimitPerClient(t *testing.T) {
	log := newMemLog()
	tb := serving(t, "b", nil)
	pc := testPool()
	pc.RateLimit = limitOf(1, 3, RateByClient)
	c, _ := startCore(t, Config{TrustedProxies: loopback, AccessLog: log.AccessLog}, pc, tb.b)
	start := time.Now()
	ok, first := burst(t, c, 8, xff("192.0.2.10"))
	if most := 3 + int(time.Since(start).Seconds()) + 1; ok < 3 || ok > most {
		t.Errorf("%d requests passed in %v, want the burst of 3 and at most %d", ok, time.Since(start), most)
	}
	checkRefusal(t, "client A", first, `"pool:test";q=3;w=3`, 1)
	if n := tb.hits.Load(); n != int64(ok) {
		t.Errorf("the backend took %d requests, want the %d that passed", n, ok)
	}
	for _, other := range []req{xff("192.0.2.20"), {}} {
		if got := do(c, other); got.status != 200 {
			t.Errorf("another client (%q) after A's burst: %d, want 200", other.fields, got.status)
		}
	}
	refused := uint64(8 - ok)
	var st stats.Process
	c.Stats(&st)
	if len(st.Limited) != 1 || st.Limited[0] != (stats.Limited{Pool: "test", Route: "", Requests: refused}) {
		t.Errorf("refusals counted %+v, want %d of pool test", st.Limited, refused)
	}
	var logged uint64
	for _, l := range logLines[struct {
		Status               int
		Pool, Route, Backend string
	}](t, log) {
		if l.Status == 429 {
			logged++
			if l.Pool != "test" || l.Route != "" || l.Backend != "" {
				t.Errorf("a 429's access log line: %+v", l)
			}
		}
	}
	if logged != refused {
		t.Errorf("%d 429s in the access log, want %d", logged, refused)
	}
}

// An IPv6 client is limited by its /64: two addresses of one /64 share a
// bucket, another /64 has its own, but NAT64 and Teredo addresses, which
// carry an IPv4 client each, count whole; an IPv4 client is the same key
// when it arrives IPv4-mapped, behind a proxy or as the peer itself.
func TestRateLimitIPv6ClientsByPrefix(t *testing.T) {
	pc := testPool()
	pc.RateLimit = limitOf(1, 2, RateByClient)
	c, _ := startCore(t, Config{TrustedProxies: loopback, NewLimiter: frozenLimits()}, pc, serving(t, "b", nil).b)
	peer := func(addr string) req { return req{client: netip.AddrPortFrom(netip.MustParseAddr(addr), 1).String()} }
	for _, tc := range []struct {
		r    req
		want int
	}{
		{xff("2001:db8:1:2::1"), 200},
		{xff("2001:db8:1:2:ffff:ffff:ffff:ffff"), 200},
		{xff("2001:db8:1:2::2"), 429}, // the /64's burst of 2 is spent
		{peer("2001:db8:1:2::3"), 429},
		{xff("2001:db8:1:3::1"), 200}, // another /64
		// NAT64 and Teredo addresses carry an IPv4 client each: whole.
		{xff("64:ff9b::c000:201"), 200},
		{xff("64:ff9b::c000:201"), 200},
		{xff("64:ff9b::c000:201"), 429},
		{xff("64:ff9b::c000:202"), 200},
		{xff("2001:0:4136:e378:8000:63bf:3fff:fdd2"), 200},
		{xff("2001:0:4136:e378:8000:63bf:3fff:fdd2"), 200},
		{xff("2001:0:4136:e378:8000:63bf:3fff:fdd3"), 200},
		{xff("192.0.2.1"), 200},
		{xff("::ffff:192.0.2.1"), 200},
		{peer("::ffff:192.0.2.1"), 429},
		{xff("192.0.2.2"), 200},
	} {
		if got := do(c, tc.r); got.status != tc.want {
			t.Errorf("client %q%s: %d, want %d", tc.r.fields, tc.r.client, got.status, tc.want)
		}
	}
}

// A client that is not a trusted proxy cannot dodge its limit by naming
// another client in X-Forwarded-For, Forwarded or X-Real-IP: its own
// address is the key, with no trusted proxies and with a list that does
// not hold it.
func TestRateLimitIgnoresUntrustedForwarding(t *testing.T) {
	for _, trusted := range [][]netip.Prefix{nil, {netip.MustParsePrefix("10.0.0.0/8")}} {
		pc := testPool()
		pc.RateLimit = limitOf(1, 3, RateByClient)
		c, _ := startCore(t, Config{TrustedProxies: trusted, NewLimiter: frozenLimits()}, pc, serving(t, "b", nil).b)
		ok := 0
		for i := range 10 {
			a := fmt.Sprintf("198.51.100.%d", i)
			if do(c, req{fields: "X-Forwarded-For: " + a + "\r\nForwarded: for=" + a + "\r\nX-Real-IP: " + a + "\r\n"}).status == 200 {
				ok++
			}
		}
		if ok != 3 {
			t.Errorf("trusted proxies %v: %d of 10 requests passed, want the burst of 3", trusted, ok)
		}
	}
}

// A route's limit applies first, keyed by a header's value or shared by
// the whole route; a request without the header is not limited by a
// header key. The pool's own limit applies after it, to what routes send
// and to what no route takes, and a request the route refused takes
// nothing from the pool's bucket. Refusals are counted by pool and route.
func TestRateLimitRouteKeys(t *testing.T) {
	c, def := startCore(t, Config{NewLimiter: frozenLimits()}, testPool(), serving(t, "default", nil).b)
	api := poolConfig("api")
	api.RateLimit = limitOf(1, 4, RateByRoute)
	ap, err := c.AddPool(api, []*backend.Backend{serving(t, "api", nil).b})
	if err != nil {
		t.Fatal(err)
	}
	specs := []route.Spec{
		{Name: "keyed", PathPrefix: "/keyed", Target: 0},
		{Name: "shared", PathPrefix: "/shared", Target: 0},
		{Name: "tight", PathPrefix: "/tight", Target: 1},
		{Name: "api", PathPrefix: "/api", Target: 1},
	}
	table, err := route.New(specs, route.Reject)
	if err != nil {
		t.Fatal(err)
	}
	c.SetRouting(Routing{Table: table, Pools: []*Pool{def, ap}, Default: def,
		Limits: []*RateLimit{{Spec: ratelimit.Spec{Rate: 1, Burst: 2}, Key: RateByHeader, Header: "X-Api-Key"},
			limitOf(2, 3, RateByRoute), limitOf(1, 1, RateByRoute)}})
	keyed := func(key string) req { return req{target: "/keyed", fields: "x-api-key: " + key + "\r\n"} }
	ok, first := burst(t, c, 6, keyed("k1"))
	if ok != 2 {
		t.Errorf("key 1: %d passed, want the burst of 2", ok)
	}
	checkRefusal(t, "key 1", first, `"route:keyed";q=2;w=2`, 1)
	if got := do(c, keyed("k2")); got.status != 200 {
		t.Errorf("key 2 after key 1's burst: %d", got.status)
	}
	for range 5 {
		if got := do(c, req{target: "/keyed"}); got.status != 200 {
			t.Fatalf("without the header: %d, want 200", got.status)
		}
	}
	// The shared bucket: whoever sends, three pass, then 429.
	ok, first = burst(t, c, 4, req{target: "/shared"})
	if ok != 3 {
		t.Errorf("shared: %d passed, want the burst of 3", ok)
	}
	checkRefusal(t, "shared", first, `"route:shared";q=3;w=2`, 1)
	if got := do(c, req{target: "/shared", client: "192.0.2.7:1", fields: "X-Api-Key: x\r\n"}); got.status != 429 {
		t.Errorf("another client on the shared route: %d, want 429", got.status)
	}
	// The tight route's one token goes with one of the pool's; its
	// refusal takes none, so the pool's bucket has three left.
	ok, first = burst(t, c, 3, req{target: "/tight"})
	if ok != 1 {
		t.Errorf("tight: %d passed, want 1", ok)
	}
	checkRefusal(t, "tight", first, `"route:tight";q=1;w=1`, 1)
	ok, first = burst(t, c, 5, req{target: "/api"})
	if ok != 3 {
		t.Errorf("pool api after the tight route: %d passed, want the 3 of its 4 left", ok)
	}
	checkRefusal(t, "pool api", first, `"pool:api";q=4;w=4`, 1)
	var st stats.Process
	c.Stats(&st)
	got := map[string]uint64{}
	for _, l := range st.Limited {
		got[l.Pool+"/"+l.Route] = l.Requests
	}
	want := map[string]uint64{"test/keyed": 4, "test/shared": 2, "api/tight": 2, "api/api": 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("refusals counted %v, want %v", got, want)
	}
}
