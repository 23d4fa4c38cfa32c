package core

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"relay/internal/h1"
	"relay/internal/ratelimit"
	"relay/internal/stats"
)

// RateKey says what a rate limit gives a bucket of its own.
type RateKey uint8

// What a rate limit counts by.
const (
	// RateByClient: the client's address, after trusted proxies, as
	// X-Forwarded-For and hashing see it; for IPv6, its /64.
	RateByClient RateKey = iota
	// RateByHeader: the value of RateLimit.Header; a request without the
	// header is not limited.
	RateByHeader
	// RateByRoute: one bucket for every request of the route (or pool).
	RateByRoute
)

// RateLimit is a rate limit of a route or a pool as the core applies it.
type RateLimit struct {
	ratelimit.Spec
	Key RateKey
	// Header names the header of RateByHeader.
	Header string
	// Store is where Config.NewLimiter keeps the buckets: "" in memory,
	// or StoreRedis; Failure is what a limit over that store answers
	// while it cannot be reached. The core reads neither.
	Store   string
	Failure ratelimit.Failure
}

// StoreRedis is RateLimit.Store for buckets in Redis.
const StoreRedis = "redis"

// limitName names the buckets of rate limit r of scope: limits of one
// name share their buckets, in every process of a relay, so the name
// holds everything a bucket's meaning depends on.
func limitName(scope string, r RateLimit) string {
	return fmt.Sprintf("%s rate=%d burst=%d key=%d %s", scope, r.Rate, r.Burst, r.Key, strings.ToLower(r.Header))
}

// limiter makes the buckets of rate limit r of scope: Config.NewLimiter's,
// or by default a table in this process's memory, made when a limit
// first needs it.
func (c *Core) limiter(scope string, r RateLimit) ratelimit.Limiter {
	name := limitName(scope, r)
	if c.cfg.NewLimiter != nil {
		return c.cfg.NewLimiter(name, r)
	}
	c.ownTable.Do(func() { c.table = ratelimit.NewTable(0) })
	return c.table.Limit(name, r.Spec)
}

// limit is a rate limit in force: its buckets and its answer's fields.
type limit struct {
	cfg    RateLimit
	lim    ratelimit.Limiter
	header string // RateByHeader's name, lower case
	// policy is the RateLimit-Policy value and name the policy's name
	// as the RateLimit field starts, both made once.
	policy, name []byte
}

// newLimit makes the limit r of the route or pool scope ("route:api",
// "pool:default"), or returns nil when r is nil.
func (c *Core) newLimit(r *RateLimit, scope string) *limit {
	if r == nil {
		return nil
	}
	l := &limit{cfg: *r, lim: c.limiter(scope, *r), header: strings.ToLower(r.Header)}
	// The fields of draft-ietf-httpapi-ratelimit-headers-09 (the format
	// of -08 on): RateLimit-Policy is a list of policies, each a name
	// with q (the quota) and w (the window in seconds it is granted
	// over); RateLimit gives each policy's r (the quota left) and t
	// (seconds until it is restored). A token bucket grants burst
	// requests over the time an empty bucket takes to fill.
	l.name = strconv.AppendQuote(nil, scope)
	window := (int64(r.Burst) + int64(r.Rate) - 1) / int64(r.Rate)
	l.policy = append(append([]byte(nil), l.name...), ";q="...)
	l.policy = strconv.AppendInt(l.policy, int64(r.Burst), 10)
	l.policy = append(l.policy, ";w="...)
	l.policy = strconv.AppendInt(l.policy, window, 10)
	return l
}

// keep returns old when it enforces what r asks, so a reload that leaves
// a limit as it was keeps its buckets; else a new limit.
func (c *Core) keepLimit(old *limit, r *RateLimit, scope string) *limit {
	if old != nil && r != nil && old.cfg == *r && string(old.name) == strconv.Quote(scope) {
		return old
	}
	return c.newLimit(r, scope)
}

// take takes a token for x; ok is false when x has no key (no such
// header) and the limit does not apply.
func (l *limit) take(x *Exchange, c *Core, now time.Time) (d ratelimit.Decision, ok bool) {
	var key []byte
	switch l.cfg.Key {
	case RateByRoute:
	case RateByHeader:
		f := x.field(l.header)
		if f == nil {
			return d, false
		}
		key = f.Value
	default:
		// An IPv4 client is the same key however it arrived. An IPv6
		// client is its /64: a host is given a /64 of its own, so
		// counting its addresses one by one would let it take 2^64
		// buckets and crowd everyone else's out of the table.
		a := x.clientAddr(c).Unmap()
		x.clientKey = a.As16()
		if a.Is6() && !embedsIPv4(x.clientKey) {
			clear(x.clientKey[8:])
		}
		key = x.clientKey[:]
	}
	return l.lim.Take(key, now), true
}

// embedsIPv4 reports whether the IPv6 address a stands for an IPv4 client
// whose address it carries: NAT64's well-known prefix (64:ff9b::/96, RFC
// 6052) and Teredo (2001::/32, RFC 4380). Every client behind one NAT64
// gateway or one Teredo server shares a /64, so such an address counts
// whole.
func embedsIPv4(a [16]byte) bool {
	nat64 := a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && [8]byte(a[4:12]) == [8]byte{}
	teredo := a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0
	return nat64 || teredo
}

// field returns the request's first field named name (lower case).
func (x *Exchange) field(name string) *h1.Field {
	for i := range x.Req.Fields {
		if f := &x.Req.Fields[i]; len(f.Name) == len(name) && f.Is(name) {
			return f
		}
	}
	return nil
}

// clientAddr is the client's address: the peer's, or behind trusted
// proxies the rightmost X-Forwarded-For entry that is not one of them.
func (x *Exchange) clientAddr(c *Core) netip.Addr {
	addr := x.Peer.Addr.Addr()
	if x.Peer.Trusted {
		if a, ok := x.forwardedClient(c); ok {
			addr = a
		}
	}
	return addr
}

// rateLimits applies the route's rate limit, then the pool's, to every
// request with one (ratelimit.go's limits, kept by the core across
// reloads): over one, the request is answered 429; within both it takes
// a token from each.
type rateLimits struct{ c *Core }

func (rateLimits) FeatureName() string { return "rate limits" }

// Admit answers x with 429 when it is over its route's limit, or else
// its pool's.
func (r rateLimits) Admit(x *Exchange, now time.Time) (Outcome, bool) {
	p := x.pool
	pl := p.cfg().limit
	if x.routeLimit == nil && pl == nil {
		return Outcome{}, false
	}
	for _, l := range [2]*limit{x.routeLimit, pl} {
		if l == nil {
			continue
		}
		if d, ok := l.take(x, r.c, now); ok && !d.Allowed {
			n := x.limitedCount
			if n == nil {
				n = p.limited
			}
			n.Add(1)
			return x.refuse(l, d), true
		}
	}
	return Outcome{}, false
}

// refuse answers x with 429, Retry-After and the rate limit fields, and
// no body.
func (x *Exchange) refuse(l *limit, d ratelimit.Decision) Outcome {
	if x.grpcRequest() {
		return x.grpcError(429, "rate limit exceeded", true)
	}
	secs := int64((d.Wait + time.Second - 1) / time.Second)
	secs = max(secs, 1)
	b := strconv.AppendInt(x.limitBuf[:0], secs, 10)
	retry := len(b)
	b = append(b, l.name...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, int64(d.Remaining), 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, secs, 10)
	x.limitBuf = b
	resp := &x.resp
	resp.Minor, resp.Status, resp.Reason = 1, 429, nil
	resp.Fields = append(resp.Fields[:0],
		h1.Field{Name: retryAfterField, Value: b[:retry]},
		h1.Field{Name: policyField, Value: l.policy},
		h1.Field{Name: rateLimitField, Value: b[retry:]})
	resp.Body, resp.ContentLength, resp.Close = h1.BodyNone, 0, false
	if len(x.rid) > 0 {
		x.answerWithID(resp)
	}
	x.respBody.empty()
	n, _, _ := x.Door.Respond(resp, &x.respBody)
	return Outcome{Status: 429, Out: n}
}

var (
	retryAfterField = []byte("Retry-After")
	policyField     = []byte("RateLimit-Policy")
	rateLimitField  = []byte("RateLimit")
)

// limitedKey names a counter of requests refused by a rate limit.
type limitedKey struct{ pool, route string }

// limitedCounter returns the counter of pool and route, made on first use
// and kept across reloads.
func (c *Core) limitedCounter(pool, route string) *atomic.Uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.limitedCounterLocked(pool, route)
}

func (c *Core) limitedCounterLocked(pool, route string) *atomic.Uint64 {
	k := limitedKey{pool, route}
	n := c.limitedCounts[k]
	if n == nil {
		n = new(atomic.Uint64)
		c.limitedCounts[k] = n
	}
	return n
}

// limitedStats adds the count of every pool and route pair a rate limit
// refused requests of to st.
func (c *Core) limitedStats(st *stats.Process) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.limitedCounts {
		if v := n.Load(); v > 0 {
			st.Limited = append(st.Limited, stats.Limited{Pool: k.pool, Route: k.route, Requests: v})
		}
	}
}
