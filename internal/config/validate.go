package config

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate checks c and returns *Errors listing every problem, or nil. Load,
// Parse and Apply call it; code that builds or edits a Config calls it too.
func (c *Config) Validate(opts Options) error {
	var errs Errors
	c.check(&errs, opts)
	return errs.err()
}

// at returns a Problem located where key was set: the flag that overrode it,
// else its line in the file.
func (c *Config) at(key string) Problem {
	if flag, ok := c.flags[key]; ok {
		return Problem{File: FlagsFile, Key: flag}
	}
	return Problem{File: c.Path, Line: c.lines[key], Key: key}
}

// check appends every problem with c to errs.
func (c *Config) check(errs *Errors, opts Options) {
	bad := func(key, format string, args ...any) {
		p := c.at(key)
		p.Msg = fmt.Sprintf(format, args...)
		errs.add(p)
	}
	intRange := func(key string, v, lo, hi int) {
		switch {
		case v < 0 && lo >= 0:
			bad(key, "must not be negative, got %d", v)
		case v < lo || v > hi:
			if hi == maxInt {
				bad(key, "must be at least %d, got %d", lo, v)
			} else {
				bad(key, "must be between %d and %d, got %d", lo, hi, v)
			}
		}
	}
	positive := func(key string, d time.Duration) {
		switch {
		case d < 0:
			bad(key, "must not be negative, got %v", d)
		case d == 0:
			bad(key, "must be longer than zero")
		}
	}

	intRange("port", c.Port, 1, 65535)
	// A listen derived from port is only as good as port, already checked.
	if c.Listen != "" && (c.listenSet || c.Listen != ":"+strconv.Itoa(c.Port)) {
		if msg := checkListen(c.Listen); msg != "" {
			bad("listen", "%s", msg)
		}
	}
	c.checkTLS(bad)
	switch {
	case c.Algorithm == "":
		bad("algorithm", "must not be empty")
	case len(opts.Algorithms) > 0 && !slices.Contains(opts.Algorithms, c.Algorithm):
		known := strings.Join(opts.Algorithms, ", ")
		if s := closest(c.Algorithm, opts.Algorithms); s != "" {
			bad("algorithm", "unknown algorithm %s; did you mean %q? known: %s", quote(c.Algorithm), s, known)
		} else {
			bad("algorithm", "unknown algorithm %s; known: %s", quote(c.Algorithm), known)
		}
	}
	c.checkBackends(errs)

	hc := c.HealthCheck
	if hc.Type != "http" && hc.Type != "tcp" {
		bad("health_check_type", `must be "http" or "tcp", got %s%s`, quote(hc.Type), didYouMean(hc.Type, []string{"http", "tcp"}))
	}
	if msg := checkHealthPath(hc.Path); msg != "" {
		bad("health_check_path", "%s", msg)
	}
	positive("health_check_interval", hc.Interval)
	positive("health_check_timeout", hc.Timeout)
	if hc.Interval > 0 && hc.Timeout > 0 && hc.Timeout >= hc.Interval &&
		!c.undecoded["health_check_interval"] && !c.undecoded["health_check_timeout"] {
		bad("health_check_timeout", "health_check_timeout (%v) must be shorter than health_check_interval (%v), so checks of one backend never overlap", hc.Timeout, hc.Interval)
	}
	intRange("health_check_rise", hc.Rise, 1, maxInt)
	intRange("health_check_fall", hc.Fall, 1, maxInt)

	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			bad("trusted_proxies", "entry %d is not a valid address range", i)
		}
	}

	intRange("log_max_size_mb", c.LogMaxSizeMB, 1, maxInt)
	intRange("log_max_backups", c.LogMaxBackups, 0, maxInt)
	intRange("log_max_age_days", c.LogMaxAgeDays, 0, maxInt)
	switch c.AccessLogFormat {
	case "json", "combined":
	default:
		bad("access_log_format", `must be "json" or "combined", got %s`, quote(c.AccessLogFormat))
	}
	switch {
	case c.AccessLogFile == "":
	case !c.AccessLog:
		bad("access_log_file", "is set but access_log is false, so nothing would be written to it; remove one of them")
	case c.LogFile != "" && filepath.Clean(c.AccessLogFile) == filepath.Clean(c.LogFile):
		bad("access_log_file", "is log_file (%s); leave access_log_file empty to write access lines to log_file", quote(c.LogFile))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log_level", "must be one of debug, info, warn, error; got %s%s", quote(c.LogLevel), didYouMean(c.LogLevel, []string{"debug", "info", "warn", "error"}))
	}

	positive("connect_timeout", c.ConnectTimeout)
	positive("response_timeout", c.ResponseTimeout)
	positive("client_header_timeout", c.ClientHeaderTimeout)
	positive("idle_timeout", c.IdleTimeout)
	positive("client_body_timeout", c.ClientBodyTimeout)
	intRange("client_body_min_rate", c.ClientBodyMinRate, 0, maxInt)
	if c.MaxBodyBytes < 0 {
		bad("max_body_bytes", "must not be negative, got %d", c.MaxBodyBytes)
	}
	if c.BodyBufferBytes < 0 || c.BodyBufferBytes > MaxBodyBufferBytes {
		bad("body_buffer_bytes", "must be between 0 and %d, got %d", MaxBodyBufferBytes, c.BodyBufferBytes)
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout", "must not be negative, got %v", c.ShutdownTimeout)
	}

	intRange("max_idle_conns_per_backend", c.MaxIdleConnsPerBackend, 0, maxInt)
	positive("upstream_idle_timeout", c.UpstreamIdleTimeout)
	positive("tunnel_idle_timeout", c.TunnelIdleTimeout)
	intRange("max_connections", c.MaxConnections, 1, maxInt)
	intRange("retries", c.Retries, 0, MaxRetries)
	intRange("workers", c.Workers, 0, maxInt)
	intRange("processes", c.Processes, 0, MaxProcesses)
	if c.CPUAffinity && c.Processes == 1 {
		bad("cpu_affinity", "binds each serving process to a core, so it needs processes other than 1")
	}
	intRange("max_header_bytes", c.MaxHeaderBytes, MinHeaderBytes, MaxHeaderBytesLimit)
	intRange("breaker_failures", c.BreakerFailures, 0, maxInt)
	for _, s := range c.BreakerStatuses {
		if s < 100 || s > 599 {
			bad("breaker_statuses", "%d is not an HTTP status (100-599)", s)
		}
	}
	if c.BreakerFailures > 0 {
		positive("breaker_open_time", c.BreakerOpenTime)
	}
	intRange("max_ejected_percent", c.MaxEjectedPercent, 0, 100)
	intRange("backend_max_requests", c.BackendMaxRequests, 0, maxInt)
	if n := c.ServingProcesses(); c.BackendMaxRequests > 0 && c.BackendMaxRequests < n {
		bad("backend_max_requests", splitMsg, c.BackendMaxRequests, n)
	}
	intRange("max_queued_requests", c.MaxQueuedRequests, 0, maxInt)
	if c.QueueTimeout < 0 {
		bad("queue_timeout", "must not be negative, got %v", c.QueueTimeout)
	}
	intRange("retry_budget_percent", c.RetryBudgetPercent, 0, 100)
	intRange("retry_budget_floor", c.RetryBudgetFloor, 0, maxInt)
	if c.SlowStart < 0 {
		bad("slow_start", "must not be negative, got %v", c.SlowStart)
	}
	c.checkAdmin(bad)
}

// checkAdmin reports an admin listener that is not HOST:PORT, one reachable
// beyond this machine without a token, and a token too short to guard it.
func (c *Config) checkAdmin(bad func(key, format string, args ...any)) {
	if c.AdminToken != "" && len(c.AdminToken) < MinAdminToken {
		bad("admin_token", "must be at least %d characters, got %d", MinAdminToken, len(c.AdminToken))
	}
	if c.AdminListen == "" {
		return
	}
	if msg := checkListen(c.AdminListen); msg != "" {
		bad("admin_listen", "%s", msg)
		return
	}
	if c.AdminToken == "" && !LoopbackOnly(c.AdminListen) {
		bad("admin_listen", "%s is reachable beyond this machine, so the admin API needs admin_token "+
			"(a secret of at least %d characters, sent as Authorization: Bearer TOKEN); "+
			"or listen on 127.0.0.1", quote(c.AdminListen), MinAdminToken)
	}
	if c.listenSet || c.Listen != ":"+strconv.Itoa(c.Port) || c.Listen == c.AdminListen {
		if sameAddress(c.Listen, c.AdminListen) {
			bad("admin_listen", "%s is also the client listen address; the admin listener is never shared with client traffic", quote(c.AdminListen))
		}
	}
}

// LoopbackOnly reports whether a listen address accepts connections from
// this machine only: its host is a loopback address or "localhost".
func LoopbackOnly(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameAddress reports whether two listen addresses would bind the same
// port on overlapping hosts (port 0 picks a free port, so never clashes).
func sameAddress(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb || pa == "0" {
		return false
	}
	return ha == hb || ha == "" || hb == "" || ha == "0.0.0.0" || hb == "0.0.0.0" || ha == "::" || hb == "::"
}

const maxInt = int(^uint(0) >> 1)

// splitMsg explains a request cap too small to split: with several
// processes each serves an equal part of every cap, and a part of 0 would
// serve nothing.
const splitMsg = "%d cannot be split over %d serving processes (each gets an equal part of the cap); set at least the process count, or 0 for no cap"

// checkBackends reports empty lists, bad URLs and weights, and duplicates.
func (c *Config) checkBackends(errs *Errors) {
	fromFlags := c.flags["backends"]
	where := c.backendAt
	if len(c.Backends) == 0 && c.backendProblems == 0 && c.Discovery.Etcd == nil && !c.undecoded["discovery"] {
		p := c.at("backends")
		p.Msg = "no backends configured; list at least one (- url: http://HOST:PORT), pass -backends, or discover them (discovery: etcd:)"
		errs.add(p)
	}
	c.checkUpstreamTLS(errs, where)
	first := make(map[string]int, len(c.Backends))
	for i, b := range c.Backends {
		msgs := checkBackendURL(b.URL, b.raw)
		for _, m := range msgs {
			p := where(i, "url", b.Line)
			p.Msg = m
			errs.add(p)
		}
		wl := b.weightLine
		if wl == 0 {
			wl = b.Line
		}
		switch {
		case b.Weight < 1:
			p := where(i, "weight", wl)
			p.Msg = fmt.Sprintf("weight %d is below 1", b.Weight)
			errs.add(p)
		case b.Weight > MaxWeight:
			p := where(i, "weight", wl)
			p.Msg = fmt.Sprintf("weight %d is above the maximum %d", b.Weight, MaxWeight)
			errs.add(p)
		}
		if n := c.ServingProcesses(); b.MaxRequests > 0 && b.MaxRequests < n {
			p := where(i, "max_requests", b.maxRequestsLine)
			p.Msg = fmt.Sprintf(splitMsg, b.MaxRequests, n)
			errs.add(p)
		}
		if len(msgs) > 0 {
			continue
		}
		id := strings.ToLower(b.URL.Scheme) + "://" + canonicalHost(b.URL)
		if j, dup := first[id]; dup {
			p := where(i, "url", b.Line)
			earlier := quote(c.Backends[j].raw)
			if l := c.Backends[j].Line; l > 0 && fromFlags == "" {
				earlier = fmt.Sprintf("line %d", l)
			} else if c.Backends[j].raw == "" {
				earlier = fmt.Sprintf("backends[%d]", j)
			}
			name := b.raw
			if name == "" {
				name = b.URL.String()
			}
			p.Msg = fmt.Sprintf("%s duplicates the backend at %s (both are %s)", quote(name), earlier, id)
			errs.add(p)
			continue
		}
		first[id] = i
	}
}

// backendAt returns a Problem located at field of backend i: the flag
// that gave the backends, else the entry's key and line in the file.
func (c *Config) backendAt(i int, field string, line int) Problem {
	if fromFlags := c.flags["backends"]; fromFlags != "" {
		return Problem{File: FlagsFile, Key: fromFlags}
	}
	key := c.Backends[i].key
	if key == "" {
		key = fmt.Sprintf("backends[%d]", i)
	}
	return Problem{File: c.Path, Line: line, Key: key + "." + field}
}

// checkListen returns what is wrong with a listen address, or "".
func checkListen(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("%s is not HOST:PORT (for example \":8080\" or \"127.0.0.1:8080\")", quote(s))
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("port %s in %s is not a number from 0 to 65535", quote(port), quote(s))
	}
	if host != "" && !validHost(host) {
		return fmt.Sprintf("host %s in %s is not a valid host name or IP address", quote(host), quote(s))
	}
	return ""
}

// checkHealthPath returns what is wrong with a health check request target,
// or "". The path goes onto the wire verbatim, so anything that would break
// the request line is refused here rather than at the backend.
func checkHealthPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return fmt.Sprintf("must start with \"/\", got %s", quote(p))
	}
	for i := 0; i < len(p); i++ {
		if b := p[i]; b <= ' ' || b >= 0x7f || b == '#' {
			return fmt.Sprintf("%s holds a space, '#', control or non-ASCII byte; percent-encode it", quote(p))
		}
	}
	return ""
}
