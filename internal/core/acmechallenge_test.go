package core

import (
	"errors"
	"net/http"
	"sync"
	"testing"

	"relay/internal/ratelimit"
	"relay/internal/route"
)

// ACME's HTTP-01 challenges are answered before routing (acmechallenge.go),
// through the fake door.

// challengeAnswers holds one challenge in flight per host and records
// every lookup.
type challengeAnswers struct {
	mu     sync.Mutex
	tokens map[string]string // host: token
	asked  []string
	err    error
}

func (a *challengeAnswers) HTTP01(host, token string) (string, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, host+" "+token)
	if a.err != nil {
		return "", false, a.err
	}
	if t, ok := a.tokens[host]; ok && t == token {
		return token + ".thumbprint", true, nil
	}
	return "", false, nil
}

// challengeCore is a core answering challenges for a.relay.test and
// b.relay.test, whose one route redirects every cleartext request to
// https, in front of a pool with a rate limit of a burst of one, one a second.
func challengeCore(t *testing.T, a *challengeAnswers) (*Core, *testBackend) {
	t.Helper()
	tb := serving(t, "b", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("backend")) })
	pc := testPool()
	pc.RateLimit = &RateLimit{Spec: ratelimit.Spec{Rate: 1, Burst: 1}, Key: RateByClient}
	cfg := Config{RequestID: true, Features: func(c *Core) []Feature {
		return append([]Feature{NewACMEChallenges([]string{"a.relay.test", "b.relay.test"}, a)}, DefaultFeatures(c)...)
	}}
	c, p := startCore(t, cfg, pc, tb.b)
	table, err := route.New([]route.Spec{{Name: "https", Scheme: "http", Redirect: &route.Redirect{Status: 308, Scheme: "https"}}}, route.Reject)
	if err != nil {
		t.Fatal(err)
	}
	c.SetRouting(Routing{Table: table, Pools: []*Pool{p}, Default: p})
	return c, tb
}

func TestACMEChallengeAnsweredBeforeRouting(t *testing.T) {
	a := &challengeAnswers{tokens: map[string]string{"a.relay.test": "tok-A_1", "b.relay.test": "tokB"}}
	c, tb := challengeCore(t, a)
	path := "/.well-known/acme-challenge/"
	// Answered whatever the case, port or trailing dot of Host, many
	// times over: no rate limit takes a token from it, no redirect.
	for i, host := range []string{"a.relay.test", "A.Relay.TEST:80", "a.relay.test.", "a.relay.test.:8080"} {
		r := do(c, req{target: path + "tok-A_1", host: host})
		if r.status != 200 || r.body != "tok-A_1.thumbprint" || r.header.Get("Content-Type") != "text/plain" {
			t.Fatalf("%d %s: %d %q %v", i, host, r.status, r.body, r.header)
		}
		if r.header.Get("X-Request-Id") == "" || r.outcome.Out != int64(len("tok-A_1.thumbprint")) {
			t.Errorf("%s: no request id or outcome %+v", host, r.outcome)
		}
	}
	if r := do(c, req{method: "HEAD", target: path + "tokB", host: "b.relay.test"}); r.status != 200 || r.body != "" {
		t.Errorf("HEAD: %d %q", r.status, r.body)
	}
	// A token not in flight, another host's token, a token that cannot
	// be one: relay's own 404, never the route's redirect.
	for _, tc := range []struct{ host, token string }{
		{"a.relay.test", "other"}, {"b.relay.test", "tok-A_1"}, {"a.relay.test", ""}, {"a.relay.test", "a/b"}, {"a.relay.test", "a?x=1"},
	} {
		r := do(c, req{target: path + tc.token, host: tc.host})
		if r.status != 404 {
			t.Errorf("%s %q: %d %q", tc.host, tc.token, r.status, r.body)
		}
	}
	// The lookups that reached the answers: only valid tokens of names
	// relay orders, the host in lower case without port or dot.
	a.mu.Lock()
	asked := len(a.asked)
	if a.asked[1] != "a.relay.test tok-A_1" {
		t.Errorf("asked %q", a.asked[1])
	}
	a.mu.Unlock()
	if asked != 7 {
		t.Errorf("%d lookups, want 7", asked)
	}
	// Other hosts and paths pass untouched: to the route's redirect.
	for _, rq := range []req{{target: path + "tok-A_1", host: "c.relay.test"}, {target: "/.well-known/acme-challengeX", host: "a.relay.test"},
		{target: "/", host: "a.relay.test"}, {target: path + "tok-A_1", host: "[::1]:80"}} {
		if r := do(c, rq); r.status != 308 {
			t.Errorf("%s %s: %d, want the redirect", rq.host, rq.target, r.status)
		}
	}
	a.mu.Lock()
	if len(a.asked) != asked {
		t.Errorf("requests for other hosts or paths were looked up: %v", a.asked[asked:])
	}
	a.mu.Unlock()
	// Over TLS the route lets requests through to the pool, whose rate
	// limit allows a burst of one: challenges are answered past it.
	if r := do(c, req{tls: true, host: "a.relay.test"}); r.status != 200 || r.body != "backend" {
		t.Fatalf("first request over TLS: %d %q", r.status, r.body)
	}
	if r := do(c, req{tls: true, host: "a.relay.test"}); r.status != 429 {
		t.Fatalf("second request over TLS: %d, want 429", r.status)
	}
	if r := do(c, req{tls: true, target: path + "tokB", host: "b.relay.test"}); r.status != 200 || r.body != "tokB.thumbprint" {
		t.Errorf("a challenge past the rate limit: %d %q", r.status, r.body)
	}
	if n := tb.hits.Load(); n != 1 {
		t.Errorf("the backend took %d requests, want 1", n)
	}
	// A lookup that fails is relay's 503.
	a.mu.Lock()
	a.err = errors.New("too many in flight")
	a.mu.Unlock()
	if r := do(c, req{target: path + "tokB", host: "b.relay.test"}); r.status != 503 {
		t.Errorf("failed lookup: %d %q", r.status, r.body)
	}
}

// TestACMEChallengesNamesSwapped: without names the feature answers
// nothing (the route's redirect takes the request); SetNames makes it
// answer for the names it gives, and for those alone.
func TestACMEChallengesNamesSwapped(t *testing.T) {
	a := &challengeAnswers{tokens: map[string]string{"a.relay.test": "tokA", "b.relay.test": "tokB"}}
	tb := serving(t, "b", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("backend")) })
	f := NewACMEChallenges(nil, a)
	c, p := startCore(t, Config{Features: func(c *Core) []Feature {
		return append([]Feature{f}, DefaultFeatures(c)...)
	}}, testPool(), tb.b)
	table, err := route.New([]route.Spec{{Name: "https", Scheme: "http", Redirect: &route.Redirect{Status: 308, Scheme: "https"}}}, route.Reject)
	if err != nil {
		t.Fatal(err)
	}
	c.SetRouting(Routing{Table: table, Pools: []*Pool{p}, Default: p})
	path := "/.well-known/acme-challenge/"
	status := func(host, token string) int { return do(c, req{target: path + token, host: host}).status }
	if s := status("a.relay.test", "tokA"); s != 308 {
		t.Fatalf("without names: %d, want the route's 308", s)
	}
	f.SetNames([]string{"a.relay.test"})
	if s, s2 := status("a.relay.test", "tokA"), status("b.relay.test", "tokB"); s != 200 || s2 != 308 {
		t.Fatalf("names [a]: a %d (want 200), b %d (want 308)", s, s2)
	}
	f.SetNames([]string{"b.relay.test"})
	if s, s2 := status("a.relay.test", "tokA"), status("b.relay.test", "tokB"); s != 308 || s2 != 200 {
		t.Fatalf("names [b]: a %d (want 308), b %d (want 200)", s, s2)
	}
}
