package config

import (
	"testing"
	"time"

	"relay/internal/ratelimit"
)

// TestRateLimitProblems: each mistake in a rate_limit, at the top level,
// in a pool and in a route, is the one problem, on its line and key.
func TestRateLimitProblems(t *testing.T) {
	const b1 = "  - url: http://127.0.0.1:8001"
	tests := []problemCase{
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
		{"bad store", y("backends:", b1, "rate_limit: {rate: 5, store: redsi}"), 3, "rate_limit.store", `must be "memory" or "redis", got "redsi"; did you mean "redis"?`},
		{"bad on_store_error", y("backends:", b1, "rate_limit: {rate: 5, on_store_error: open}"), 3, "rate_limit.on_store_error", `must be "allow", "deny" or "local", got "open"`},
		{"redis store without redis", y("backends:", b1, "rate_limit: {rate: 5, store: redis}"), 3, "rate_limit.store", "the file has no redis section"},
		{"redis store of a route without redis", y("backends:", b1, "routes:", "  - pool: default", "    rate_limit: {rate: 5, store: redis}"), 5, "routes[0].rate_limit.store", "no redis section"},
		{"redis store of a pool without redis", y("pools:", "  api:", "    backends: [http://127.0.0.1:9001]", "    rate_limit: {rate: 5, store: redis}"), 4, "pools.api.rate_limit.store", "no redis section"},
		{"redis not a mapping", y("backends:", b1, "redis: 127.0.0.1:6379"), 3, "redis", "must be a mapping such as {address: 127.0.0.1:6379}"},
		{"redis without address", y("backends:", b1, "redis:", "  db: 1"), 4, "redis.address", "missing: the Redis server's HOST:PORT"},
		{"redis address without port", y("backends:", b1, "redis: {address: localhost}"), 3, "redis.address", "is not HOST:PORT"},
		{"redis address without host", y("backends:", b1, "redis: {address: \":6379\"}"), 3, "redis.address", "needs a host"},
		{"redis address port 0", y("backends:", b1, "redis: {address: \"redis.internal:00\"}"), 3, "redis.address", `port 0 in "redis.internal:00" is no server's port: give Redis's, for example 6379`},
		{"redis timeout 1ns", y("backends:", b1, "redis: {address: 127.0.0.1:6379, timeout: 1ns}"), 3, "redis.timeout", "must be at least 1ms and at most 10s, got 1ns"},
		{"redis db negative", y("backends:", b1, "redis: {address: 127.0.0.1:6379, db: -1}"), 3, "redis.db", "must not be negative, got -1"},
		{"redis timeout zero", y("backends:", b1, "redis: {address: 127.0.0.1:6379, timeout: 0}"), 3, "redis.timeout", "must be at least 1ms and at most 10s, got 0s"},
		{"redis timeout long", y("backends:", b1, "redis: {address: 127.0.0.1:6379, timeout: 1m}"), 3, "redis.timeout", "got 1m0s"},
		{"redis prefix empty", y("backends:", b1, "redis: {address: 127.0.0.1:6379, prefix: \"\"}"), 3, "redis.prefix", "must not be empty"},
		{"redis unknown key", y("backends:", b1, "redis: {address: 127.0.0.1:6379, adress: x}"), 3, "redis.adress", `did you mean "address"?`},
	}
	checkProblems(t, tests)
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

// TestRedisSection: the redis section's defaults and values, and the
// store settings of a limit.
func TestRedisSection(t *testing.T) {
	c := mustParse(t, y(
		"backends: [http://127.0.0.1:8001]",
		"rate_limit: {rate: 10, store: redis, on_store_error: deny}",
		"redis:",
		"  address: 127.0.0.1:6379",
	))
	want := Redis{Address: "127.0.0.1:6379", Timeout: DefaultRedisTimeout, Prefix: DefaultRedisPrefix}
	if c.Redis == nil || *c.Redis != want {
		t.Fatalf("redis = %+v, want %+v", c.Redis, want)
	}
	if r := c.RateLimit; r.Store != RateLimitRedis || r.OnStoreError != ratelimit.FailClosed {
		t.Errorf("rate_limit = %+v, want store redis, on_store_error deny", r)
	}
	c = mustParse(t, y(
		"backends: [http://127.0.0.1:8001]",
		"rate_limit: {rate: 10}",
		"redis: {address: \"redis.internal:6380\", username: relay, password: pw, db: 3, timeout: 200ms, prefix: \"edge:\"}",
	))
	want = Redis{Address: "redis.internal:6380", Username: "relay", Password: "pw", DB: 3, Timeout: 200 * time.Millisecond, Prefix: "edge:"}
	if c.Redis == nil || *c.Redis != want {
		t.Fatalf("redis = %+v, want %+v", c.Redis, want)
	}
	if r := c.RateLimit; r.Store != RateLimitMemory || r.OnStoreError != ratelimit.FailOpen {
		t.Errorf("rate_limit = %+v, want the defaults: store memory, on_store_error allow", r)
	}
}
