package config

import (
	"fmt"
	"net"
	"path/filepath"
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
	intRange := rangeCheck(bad)
	positive := positiveCheck(bad)

	intRange("port", c.Port, 1, 65535)
	// A listen derived from port is only as good as port, already checked.
	if c.Listen != "" && (c.listenSet || c.Listen != ":"+strconv.Itoa(c.Port)) {
		if msg := checkListen(c.Listen); msg != "" {
			bad("listen", "%s", msg)
		}
	}
	c.checkTLS(bad)
	c.checkACME(bad)
	c.checkClientAuth(errs)
	top := c.topSite()
	topBad := map[string]bool{} // the pool keys the top level is faulted on
	at := top.at
	top.at = func(key string) Problem { topBad[key] = true; return at(key) }
	c.Pool.check(errs, top, opts)
	c.checkPools(errs, opts, topBad)
	c.checkRoutes(errs, bad)
	c.checkStores(errs)

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

	positive("client_header_timeout", c.ClientHeaderTimeout)
	positive("idle_timeout", c.IdleTimeout)
	positive("client_body_timeout", c.ClientBodyTimeout)
	intRange("client_body_min_rate", c.ClientBodyMinRate, 0, maxInt)
	intRange("compress_memory_mb", c.CompressMemoryMB, 0, MaxCompressMemoryMB)
	if c.MaxBodyBytes < 0 {
		bad("max_body_bytes", "must not be negative, got %d", c.MaxBodyBytes)
	}
	if c.BodyBufferBytes < 0 || c.BodyBufferBytes > MaxBodyBufferBytes {
		bad("body_buffer_bytes", "must be between 0 and %d, got %d", MaxBodyBufferBytes, c.BodyBufferBytes)
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout", "must not be negative, got %v", c.ShutdownTimeout)
	}

	positive("tunnel_idle_timeout", c.TunnelIdleTimeout)
	intRange("max_connections", c.MaxConnections, 1, maxInt)
	intRange("workers", c.Workers, 0, maxInt)
	intRange("processes", c.Processes, 0, MaxProcesses)
	if c.CPUAffinity && c.Processes == 1 {
		bad("cpu_affinity", "binds each serving process to a core, so it needs processes other than 1")
	}
	intRange("max_header_bytes", c.MaxHeaderBytes, MinHeaderBytes, MaxHeaderBytesLimit)
	c.checkAdmin(bad)
}

// rangeCheck returns a check that v, the value of key, is in lo..hi.
func rangeCheck(bad func(key, format string, args ...any)) func(key string, v, lo, hi int) {
	return func(key string, v, lo, hi int) {
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
}

// positiveCheck returns a check that d, the value of key, is above 0.
func positiveCheck(bad func(key, format string, args ...any)) func(key string, d time.Duration) {
	return func(key string, d time.Duration) {
		switch {
		case d < 0:
			bad(key, "must not be negative, got %v", d)
		case d == 0:
			bad(key, "must be longer than zero")
		}
	}
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
