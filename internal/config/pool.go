package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"relay/internal/compress"
)

// DefaultPool is the name of the pool the top level of the file
// describes: its backends, algorithm and the other pool keys.
const DefaultPool = "default"

// Pool is one pool's settings: the backends requests are balanced over
// and everything about how. The top level of the file is the pool named
// DefaultPool (Config embeds it); each entry of pools is another, every
// key it leaves out (backends excepted) holding the top level's value.
type Pool struct {
	// Algorithm names the balancing algorithm; it is one of Options.Algorithms.
	Algorithm string `reload:"live"`
	// Backends are the upstream servers, no two alike.
	Backends []Backend `reload:"live"`
	// HealthCheck configures active health checks. A reload leaves the
	// top level's as it was; they change at restart.
	HealthCheck HealthCheck
	// ConnectTimeout bounds dialing a backend; exceeding it is a 502.
	ConnectTimeout time.Duration `reload:"live"`
	// ResponseTimeout bounds the wait for a backend's response head once the
	// request is sent; exceeding it is a 504.
	ResponseTimeout time.Duration `reload:"live"`
	// MaxGRPCTimeout caps the deadline a gRPC client's grpc-timeout
	// header sets; 0 leaves it uncapped.
	MaxGRPCTimeout time.Duration `reload:"live" key:"max_grpc_timeout"`
	// MaxIdleConnsPerBackend caps the idle keep-alive connections kept to
	// each backend; 0 keeps none.
	MaxIdleConnsPerBackend int `reload:"live"`
	// UpstreamIdleTimeout closes kept connections to backends idle longer.
	UpstreamIdleTimeout time.Duration `reload:"live"`
	// Retries is how many extra attempts, each on another backend, a request
	// that failed safely may get; 0 disables retries.
	Retries int `reload:"live"`
	// BreakerFailures failed requests in a row open a backend's circuit
	// breaker; 0 turns breakers off.
	BreakerFailures int `reload:"live"`
	// BreakerStatuses are the response statuses that count as failures.
	BreakerStatuses []int `reload:"live"`
	// BreakerGRPCStatuses are the grpc-status values (0..16) of gRPC
	// responses that count as failures, 14 (UNAVAILABLE) by default.
	BreakerGRPCStatuses []int `reload:"live" key:"breaker_grpc_statuses"`
	// BreakerOpenTime is how long an opened breaker first keeps its
	// backend out; it doubles at each reopening, up to 5 minutes.
	BreakerOpenTime time.Duration `reload:"live"`
	// MaxEjectedPercent bounds the share of backends breakers hold out.
	MaxEjectedPercent int `reload:"live"`
	// BackendTLS are the TLS settings of https backends that do not set
	// their own.
	BackendTLS UpstreamTLS `reload:"live"`
	// Protocol is what relay speaks to the pool's backends that do not
	// set their own (protocol.go): "http/1.1", "h2" (HTTP/2 over TLS, to
	// https backends) or "h2c" (HTTP/2 in clear text, to http backends).
	Protocol string `reload:"live"`
	// BackendMaxRequests caps the requests in flight to each backend that
	// sets no max_requests of its own; 0 means no cap.
	BackendMaxRequests int `reload:"live"`
	// MaxQueuedRequests bounds the requests waiting for a backend below its
	// cap; QueueTimeout bounds each wait.
	MaxQueuedRequests int           `reload:"live"`
	QueueTimeout      time.Duration `reload:"live"`
	// RetryBudgetPercent bounds retries to this share of recent requests;
	// 0 turns the budget off. RetryBudgetFloor retries a second are
	// always allowed.
	RetryBudgetPercent int `reload:"live"`
	RetryBudgetFloor   int `reload:"live"`
	// SlowStart is how long a backend that comes (back) into rotation takes
	// to reach its full share; 0 turns slow start off.
	SlowStart time.Duration `reload:"live"`
	// Sticky binds clients to backends by a cookie (sticky.go).
	Sticky Sticky `reload:"live"`
	// RateLimit, when not nil, limits the requests the pool takes
	// (after any limit of the route that sent them).
	RateLimit *RateLimit `reload:"live"`
	// Compress, when not nil, compresses the pool's responses for the
	// clients that accept it; a route's own compress replaces it.
	Compress *compress.Config `reload:"live"`
	// HashKey is what the hashing algorithms (ip-hash) hash: "client"
	// (the client address after trusted proxies), "path",
	// "header:NAME", "cookie:NAME" or "query:NAME". A request without
	// the key is hashed by its client address.
	HashKey string `reload:"live"`
	// HashBalanceFactor bounds a hashing algorithm's load: a key whose
	// backend has more than this percent of its share of the requests in
	// flight moves to the next backend in its order that has less.
	// 0 turns it off; otherwise 100..1000.
	HashBalanceFactor int `reload:"live"`

	// backendProblems counts backend entries dropped while decoding, so an
	// all-bad list is not also reported as an empty one.
	backendProblems int
	// Where a named pool was written: its name's line, and the line of
	// each key it set itself (a key it does not hold falls back to the
	// top level). The top level's pool keeps these in its Config.
	line      int
	lines     map[string]int
	undecoded map[string]bool
}

// defaultPool is every pool key's default.
func defaultPool() Pool {
	return Pool{
		Algorithm: DefaultAlgorithm,
		HealthCheck: HealthCheck{
			Type:     DefaultHealthCheckType,
			Path:     DefaultHealthCheckPath,
			Interval: DefaultHealthCheckInterval,
			Timeout:  DefaultHealthCheckTimeout,
			Rise:     DefaultHealthCheckRise,
			Fall:     DefaultHealthCheckFall,

			ReuseConnection: DefaultHealthCheckReuseConn,
		},
		ConnectTimeout:         DefaultConnectTimeout,
		ResponseTimeout:        DefaultResponseTimeout,
		MaxIdleConnsPerBackend: DefaultMaxIdleConnsPerBackend,
		UpstreamIdleTimeout:    DefaultUpstreamIdleTimeout,
		Retries:                DefaultRetries,
		BreakerFailures:        DefaultBreakerFailures,
		BreakerGRPCStatuses:    defaultBreakerGRPCStatuses(),
		BreakerOpenTime:        DefaultBreakerOpenTime,
		MaxEjectedPercent:      DefaultMaxEjectedPercent,
		BackendMaxRequests:     DefaultBackendMaxRequests,
		MaxQueuedRequests:      DefaultMaxQueuedRequests,
		QueueTimeout:           DefaultQueueTimeout,
		RetryBudgetPercent:     DefaultRetryBudgetPercent,
		RetryBudgetFloor:       DefaultRetryBudgetFloor,
		SlowStart:              DefaultSlowStart,
		Sticky:                 defaultSticky(),
		HashKey:                DefaultHashKey,
		HashBalanceFactor:      DefaultHashBalanceFactor,
		Protocol:               DefaultProtocol,
		MaxGRPCTimeout:         DefaultMaxGRPCTimeout,
	}
}

// clone returns a copy of p that shares nothing mutable with it.
func (p Pool) clone() Pool {
	p.Backends = append([]Backend(nil), p.Backends...)
	for i, b := range p.Backends {
		if b.URL != nil {
			u := *b.URL
			p.Backends[i].URL = &u
		}
	}
	p.BreakerStatuses = append([]int(nil), p.BreakerStatuses...)
	p.BreakerGRPCStatuses = append([]int(nil), p.BreakerGRPCStatuses...)
	p.lines = cloneMap(p.lines)
	p.undecoded = cloneMap(p.undecoded)
	return p
}

func cloneMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return nil
	}
	n := make(map[string]V, len(m))
	for k, v := range m {
		n[k] = v
	}
	return n
}

// site says where a pool's settings were written, so that its problems
// name them: the top level's keys, or a named pool's under pools.NAME.
type site struct {
	// at locates the problem of a pool key.
	at func(key string) Problem
	// origin is where the value a pool key holds was written: the
	// pool's own line for it, else the top level's.
	origin func(key string) Problem
	// backendAt locates the problem of field of backend i, on line.
	backendAt func(i int, field string, line int) Problem
	// undecoded reports a key whose value could not be read.
	undecoded func(key string) bool
	// processes is how many processes share each cap.
	processes int
	// noBackends is what to say when the pool has none, "" when that is
	// allowed (discovery fills it, or named pools carry the traffic).
	noBackends string
}

// topSite is where the top level's pool keys were written: a flag that
// overrode one, else its line in the file.
func (c *Config) topSite() site {
	s := site{
		at:        c.at,
		origin:    c.at,
		backendAt: c.backendAt,
		undecoded: func(key string) bool { return c.undecoded[key] },
		processes: c.ServingProcesses(),
	}
	if c.Discovery.Etcd == nil && !c.undecoded["discovery"] && len(c.Pools) == 0 && !c.undecoded["pools"] {
		s.noBackends = "no backends configured; list at least one (- url: http://HOST:PORT), pass -backends, or discover them (discovery: etcd:)"
	}
	return s
}

// check appends every problem with p's settings to errs, located by s.
// The same checks run for the top level and for every named pool.
func (p *Pool) check(errs *Errors, s site, opts Options) {
	bad := func(key, format string, args ...any) {
		pr := s.at(key)
		pr.Msg = fmt.Sprintf(format, args...)
		errs.add(pr)
	}
	intRange := rangeCheck(bad)
	positive := positiveCheck(bad)

	switch {
	case p.Algorithm == "":
		bad("algorithm", "must not be empty")
	case len(opts.Algorithms) > 0 && !slices.Contains(opts.Algorithms, p.Algorithm):
		known := strings.Join(opts.Algorithms, ", ")
		if sug := closest(p.Algorithm, opts.Algorithms); sug != "" {
			bad("algorithm", "unknown algorithm %s; did you mean %q? known: %s", quote(p.Algorithm), sug, known)
		} else {
			bad("algorithm", "unknown algorithm %s; known: %s", quote(p.Algorithm), known)
		}
	}
	if msg := checkProtocol(p.Protocol); msg != "" {
		bad("protocol", "%s", msg)
	}
	p.checkBackends(errs, s)

	hc := p.HealthCheck
	if !slices.Contains(healthCheckTypes, hc.Type) {
		bad("health_check_type", `must be "http", "tcp" or "grpc", got %s%s`, quote(hc.Type), didYouMean(hc.Type, healthCheckTypes))
	}
	p.checkGRPCService(bad, s)
	if msg := checkHealthPath(hc.Path); msg != "" {
		bad("health_check_path", "%s", msg)
	}
	positive("health_check_interval", hc.Interval)
	positive("health_check_timeout", hc.Timeout)
	if hc.Interval > 0 && hc.Timeout > 0 && hc.Timeout >= hc.Interval &&
		!s.undecoded("health_check_interval") && !s.undecoded("health_check_timeout") {
		bad("health_check_timeout", "health_check_timeout (%v) must be shorter than health_check_interval (%v), so checks of one backend never overlap", hc.Timeout, hc.Interval)
	}
	intRange("health_check_rise", hc.Rise, 1, maxInt)
	intRange("health_check_fall", hc.Fall, 1, maxInt)

	positive("connect_timeout", p.ConnectTimeout)
	positive("response_timeout", p.ResponseTimeout)
	intRange("max_idle_conns_per_backend", p.MaxIdleConnsPerBackend, 0, maxInt)
	positive("upstream_idle_timeout", p.UpstreamIdleTimeout)
	intRange("retries", p.Retries, 0, MaxRetries)
	intRange("breaker_failures", p.BreakerFailures, 0, maxInt)
	for _, st := range p.BreakerStatuses {
		if st < 100 || st > 599 {
			bad("breaker_statuses", "%d is not an HTTP status (100-599)", st)
		}
	}
	for _, st := range p.BreakerGRPCStatuses {
		if st < MinGRPCStatus || st > MaxGRPCStatus {
			bad("breaker_grpc_statuses", "%d is not a gRPC status (%d-%d; 14 is UNAVAILABLE)", st, MinGRPCStatus, MaxGRPCStatus)
		}
	}
	if p.MaxGRPCTimeout < 0 {
		bad("max_grpc_timeout", "must not be negative (0 leaves grpc-timeout uncapped), got %v", p.MaxGRPCTimeout)
	}
	if p.BreakerFailures > 0 {
		positive("breaker_open_time", p.BreakerOpenTime)
	}
	intRange("max_ejected_percent", p.MaxEjectedPercent, 0, 100)
	intRange("backend_max_requests", p.BackendMaxRequests, 0, maxInt)
	if n := s.processes; p.BackendMaxRequests > 0 && p.BackendMaxRequests < n {
		bad("backend_max_requests", splitMsg, p.BackendMaxRequests, n)
	}
	intRange("max_queued_requests", p.MaxQueuedRequests, 0, maxInt)
	if p.QueueTimeout < 0 {
		bad("queue_timeout", "must not be negative, got %v", p.QueueTimeout)
	}
	intRange("retry_budget_percent", p.RetryBudgetPercent, 0, 100)
	intRange("retry_budget_floor", p.RetryBudgetFloor, 0, maxInt)
	if p.SlowStart < 0 {
		bad("slow_start", "must not be negative, got %v", p.SlowStart)
	}
	if msg := checkHashKey(p.HashKey); msg != "" {
		bad("hash_key", "%s", msg)
	}
	if f := p.HashBalanceFactor; f != 0 && (f < 100 || f > 1000) {
		bad("hash_balance_factor", "must be 0 (off) or a percentage from 100 to 1000, got %d", f)
	}
}

// checkBackends reports empty lists, bad URLs and weights, and duplicates
// within the pool (one address may serve in several pools).
func (p *Pool) checkBackends(errs *Errors, s site) {
	where := s.backendAt
	if len(p.Backends) == 0 && p.backendProblems == 0 && s.noBackends != "" {
		pr := s.at("backends")
		pr.Msg = s.noBackends
		errs.add(pr)
	}
	p.checkUpstreamTLS(errs, s)
	first := make(map[string]int, len(p.Backends))
	for i, b := range p.Backends {
		msgs := checkBackendURL(b.URL, b.raw)
		for _, m := range msgs {
			pr := where(i, "url", b.Line)
			pr.Msg = m
			errs.add(pr)
		}
		wl := b.weightLine
		if wl == 0 {
			wl = b.Line
		}
		switch {
		case b.Weight < 1:
			pr := where(i, "weight", wl)
			pr.Msg = fmt.Sprintf("weight %d is below 1", b.Weight)
			errs.add(pr)
		case b.Weight > MaxWeight:
			pr := where(i, "weight", wl)
			pr.Msg = fmt.Sprintf("weight %d is above the maximum %d", b.Weight, MaxWeight)
			errs.add(pr)
		}
		if n := s.processes; b.MaxRequests > 0 && b.MaxRequests < n {
			pr := where(i, "max_requests", b.maxRequestsLine)
			pr.Msg = fmt.Sprintf(splitMsg, b.MaxRequests, n)
			errs.add(pr)
		}
		if len(msgs) > 0 {
			continue
		}
		p.checkBackendProtocol(errs, s, i)
		id := strings.ToLower(b.URL.Scheme) + "://" + canonicalHost(b.URL)
		if j, dup := first[id]; dup {
			pr := where(i, "url", b.Line)
			earlier := quote(p.Backends[j].raw)
			if l := p.Backends[j].Line; l > 0 && pr.File != FlagsFile {
				earlier = fmt.Sprintf("line %d", l)
			} else if p.Backends[j].raw == "" {
				earlier = fmt.Sprintf("backends[%d]", j)
			}
			name := b.raw
			if name == "" {
				name = b.URL.String()
			}
			pr.Msg = fmt.Sprintf("%s duplicates the backend at %s (both are %s)", quote(name), earlier, id)
			errs.add(pr)
			continue
		}
		first[id] = i
	}
}
