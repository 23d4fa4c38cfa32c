package config

import (
	"strings"
	"testing"
)

// TestRateLimitProblems: each mistake in a rate_limit, at the top level,
// in a pool and in a route, is the one problem, on its line and key.
func TestRateLimitProblems(t *testing.T) {
	const b1 = "  - url: http://127.0.0.1:8001"
	tests := []struct {
		name, yaml string
		line       int
		key, msg   string
	}{
		{"not a mapping", y("backends:", b1, "rate_limit: 10"), 3, "rate_limit", "must be a mapping such as {rate: 100"},
		{"rate missing", y("backends:", b1, "rate_limit: {burst: 5}"), 3, "rate_limit.rate", "is required"},
		{"rate zero", y("backends:", b1, "rate_limit:", "  rate: 0"), 4, "rate_limit.rate", "must be more than 0 requests a second, got 0"},
		{"rate negative", y("backends:", b1, "rate_limit: {rate: -3}"), 3, "rate_limit.rate", "got -3"},
		{"rate not a number", y("backends:", b1, "rate_limit: {rate: fast}"), 3, "rate_limit.rate", "must be a whole number"},
		{"burst zero", y("backends:", b1, "rate_limit:", "  rate: 5", "  burst: 0"), 5, "rate_limit.burst", "must be at least 1 request, got 0"},
		{"rate too large", y("backends:", b1, "rate_limit: {rate: 1000000001}"), 3, "rate_limit.rate", "must be at most 1000000000 requests a second, got 1000000001"},
		{"burst too large", y("backends:", b1, "rate_limit: {rate: 1, burst: 10000000000}"), 3, "rate_limit.burst", "must be at most 1000000000 requests, got 10000000000"},
		{"unknown key", y("backends:", b1, "rate_limit:", "  rate: 5", "  brust: 9"), 5, "rate_limit.brust", `did you mean "burst"?`},
		{"bad key", y("backends:", b1, "rate_limit:", "  rate: 5", "  key: clients"), 5, "rate_limit.key", `did you mean "client"?`},
		{"header without name", y("backends:", b1, "rate_limit: {rate: 5, key: \"header:\"}"), 3, "rate_limit.key", "header:NAME needs a header field name"},
		{"header with a space", y("backends:", b1, "rate_limit: {rate: 5, key: \"header:X Key\"}"), 3, "rate_limit.key", `got "X Key"`},
		{"in a pool", y("pools:", "  api:", "    backends: [http://127.0.0.1:9001]", "    rate_limit: {rate: 0}"), 4, "pools.api.rate_limit.rate", "must be more than 0"},
		{"on a redirect", y("backends:", b1, "routes:", "  - redirect: {path: /new}", "    rate_limit: {rate: 5}"), 5, "routes[0].rate_limit", "a redirect is answered before any rate limit applies"},
		{"in a route", y("backends:", b1, "routes:", "  - pool: default", "    rate_limit:", "      rate: 5", "      key: ip"), 7, "routes[0].rate_limit.key", `must be "client", "route" or "header:NAME", got "ip"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := problems(t, func() error { _, err := Parse([]byte(tt.yaml), "test.yml", testOpts); return err }())
			if len(ps) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(ps), (&Errors{ps}).Error())
			}
			p := ps[0]
			if p.File != "test.yml" || p.Line != tt.line || p.Key != tt.key || !strings.Contains(p.Msg, tt.msg) {
				t.Errorf("got %+v\nwant file test.yml, line %d, key %q, message containing %q", p, tt.line, tt.key, tt.msg)
			}
		})
	}
}

// TestRateLimitValues: burst defaults to rate, key to client; a named pool
// without one takes the top level's, a pool's own wins, routes keep theirs.
func TestRateLimitValues(t *testing.T) {
	c := mustParse(t, y(
		"backends: [http://127.0.0.1:8001]",
		"rate_limit: {rate: 10}",
		"pools:",
		"  a:",
		"    backends: [http://127.0.0.1:9001]",
		"  b:",
		"    backends: [http://127.0.0.1:9002]",
		"    rate_limit: {rate: 3, burst: 7, key: \"header:X-Api-Key\"}",
		"routes:",
		"  - pool: a",
		"    match: {path_prefix: /a}",
		"    rate_limit: {rate: 2, key: route}",
		"  - pool: b",
	))
	if r := c.RateLimit; r == nil || r.Rate != 10 || r.Burst != 10 || r.Key != RateLimitClient || r.Header() != "" {
		t.Errorf("top level: %+v", r)
	}
	if r := c.Pools["a"].RateLimit; r == nil || r.Rate != 10 || r.Burst != 10 {
		t.Errorf("pool a takes the top level's: %+v", r)
	}
	if r := c.Pools["b"].RateLimit; r == nil || r.Rate != 3 || r.Burst != 7 || r.Header() != "X-Api-Key" {
		t.Errorf("pool b: %+v", r)
	}
	if r := c.Routes[0].RateLimit; r == nil || r.Rate != 2 || r.Burst != 2 || r.Key != RateLimitRoute {
		t.Errorf("route 0: %+v", r)
	}
	if r := c.Routes[1].RateLimit; r != nil {
		t.Errorf("route 1 has none, got %+v", r)
	}
	if mustParse(t, y("backends: [http://127.0.0.1:8001]")).RateLimit != nil {
		t.Error("no rate_limit: no limit")
	}
}
