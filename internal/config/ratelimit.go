package config

import (
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"relay/internal/ratelimit"
)

// RateLimit is a token bucket in front of a pool or a route: Rate
// requests a second on average, Burst at once, counted per Key.
type RateLimit struct {
	// Spec is the bucket, as internal/ratelimit takes it and its rules
	// judged it: Rate tokens a second, Burst (Rate when not given) the
	// requests a key may send at once after being idle.
	ratelimit.Spec
	// Key says what has a bucket of its own: RateLimitClient (the
	// client's address, after trusted_proxies), "header:NAME" (the
	// value of a request header; a request without it is not limited)
	// or RateLimitRoute (every request of the route or pool shares one).
	Key string
	// Store is where the buckets are: RateLimitMemory (relay's own, shared
	// by its processes) or RateLimitRedis (shared by every instance using
	// the redis section's server).
	Store string
	// OnStoreError is what a request gets while the store cannot be
	// reached: ratelimit.FailOpen (allow: through), FailClosed (deny:
	// 429) or FailLocal (local: the limit, counted by this relay alone).
	OnStoreError ratelimit.Failure
	// Line is the YAML line of the rate_limit key.
	Line int
}

// The keys a rate limit counts by.
const (
	RateLimitClient = "client"
	RateLimitRoute  = "route"
	// RateLimitHeader prefixes a header's name: "header:X-Api-Key".
	RateLimitHeader = "header:"
)

// Where a rate limit's buckets are.
const (
	RateLimitMemory = "memory"
	RateLimitRedis  = "redis"
)

// Header returns the header whose value is the key, "" when the key is
// not a header.
func (r *RateLimit) Header() string {
	name, ok := strings.CutPrefix(r.Key, RateLimitHeader)
	if !ok {
		return ""
	}
	return name
}

var rateLimitKeys = []string{"rate", "burst", "key", "store", "on_store_error"}

// poolRateLimit reads a pool's rate_limit, the top level's or a named
// pool's.
func poolRateLimit(d *decoder, p *Pool, v *yaml.Node, path string) {
	p.RateLimit = d.rateLimit(v, path)
}

// rateLimit reads and judges one rate_limit mapping; nil when it is
// unusable (the problems are reported).
func (d *decoder) rateLimit(v *yaml.Node, at string) *RateLimit {
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, at, "must be a mapping such as {rate: 100, burst: 200, key: client}, got %s", describe(v))
		return nil
	}
	r := &RateLimit{Key: RateLimitClient, Store: RateLimitMemory, OnStoreError: ratelimit.FailOpen, Line: v.Line}
	before := len(d.errs.Problems)
	rateSet, burstSet := false, false
	d.mapping(v, at+".", rateLimitKeys, func(key string, k, val *yaml.Node) {
		path := at + "." + key
		if isNull(val) {
			return
		}
		switch key {
		case "rate":
			if n, ok := d.rateLimitCount(val, path, ratelimit.CheckRate); ok {
				r.Rate, rateSet = n, true
			}
		case "burst":
			if n, ok := d.rateLimitCount(val, path, ratelimit.CheckBurst); ok {
				r.Burst, burstSet = n, true
			}
		case "key":
			if s, ok := d.str(val, path); ok {
				d.rateLimitKey(val.Line, path, s)
				r.Key = s
			}
		case "store":
			if s, ok := d.str(val, path); ok {
				d.oneOf(val.Line, path, s, RateLimitMemory, RateLimitRedis)
				r.Store = s
			}
		case "on_store_error":
			if s, ok := d.str(val, path); ok {
				f, known := ratelimit.ParseFailure(s)
				if !known {
					names := make([]string, len(ratelimit.Failures))
					for i, f := range ratelimit.Failures {
						names[i] = f.String()
					}
					d.oneOf(val.Line, path, s, names...)
				}
				r.OnStoreError = f
			}
		}
	})
	if !rateSet && len(d.errs.Problems) == before {
		d.problem(v.Line, at+".rate", "is required: the requests a second the limit allows (rate: 100)")
	}
	if len(d.errs.Problems) > before {
		return nil
	}
	if !burstSet {
		r.Burst = r.Rate
	}
	return r
}

// rateLimitCount reads a rate or a burst, the value of path, and judges
// it by rule, ratelimit's.
func (d *decoder) rateLimitCount(val *yaml.Node, path string, rule func(int) error) (int, bool) {
	n, ok := d.integer(val, path)
	if !ok {
		return 0, false
	}
	if err := rule(n); err != nil {
		d.problem(val.Line, path, "%v", err)
		return 0, false
	}
	return n, true
}

// rateLimitKey reports a key that is not client, route or header:NAME
// with a valid field name.
func (d *decoder) rateLimitKey(line int, path, s string) {
	switch s {
	case RateLimitClient, RateLimitRoute:
		return
	}
	name, ok := strings.CutPrefix(s, RateLimitHeader)
	if !ok {
		d.problem(line, path, `must be "client", "route" or "header:NAME", got %s%s`, quote(s), didYouMean(s, []string{RateLimitClient, RateLimitRoute}))
		return
	}
	if !isToken(name) {
		d.problem(line, path, "header:NAME needs a header field name (letters, digits and !#$%%&'*+-.^_`|~), got %s", quote(name))
	}
}

// oneOf reports s, the value of path, when it is none of choices.
func (d *decoder) oneOf(line int, path, s string, choices ...string) {
	if slices.Contains(choices, s) {
		return
	}
	d.problem(line, path, "must be %s, got %s%s", orList(choices), quote(s), didYouMean(s, choices))
}

// orList writes choices as `"a" or "b"`, `"a", "b" or "c"`.
func orList(choices []string) string {
	q := make([]string, len(choices))
	for i, c := range choices {
		q[i] = strconv.Quote(c)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// isToken reports whether s is an HTTP token (RFC 9110 5.6.2), what a
// header field's name is.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
