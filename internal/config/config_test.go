package config

import (
	"errors"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestOriginalExample loads the file from relay's original description
// unchanged.
func TestOriginalExample(t *testing.T) {
	c, err := Load("../../examples/original.yml", testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if c.Algorithm != "weighted-round-robin" {
		t.Errorf("algorithm %q", c.Algorithm)
	}
	if c.HealthCheck.Interval != 10*time.Second || c.HealthCheck.Timeout != 2*time.Second {
		t.Errorf("interval %v timeout %v, want 10s 2s", c.HealthCheck.Interval, c.HealthCheck.Timeout)
	}
	if c.LogFile != "lb.log" || c.Port != 8080 || c.Listen != ":8080" {
		t.Errorf("log_file %q port %d listen %q", c.LogFile, c.Port, c.Listen)
	}
	want := []struct {
		url    string
		weight int
		line   int
	}{{"http://localhost:8001", 3, 7}, {"http://localhost:8002", 1, 9}, {"http://localhost:8003", 1, 11}}
	if len(c.Backends) != len(want) {
		t.Fatalf("%d backends, want %d", len(c.Backends), len(want))
	}
	for i, w := range want {
		b := c.Backends[i]
		if b.URL.String() != w.url || b.Weight != w.weight || b.Line != w.line {
			t.Errorf("backend %d: %s weight %d line %d, want %s weight %d line %d", i, b.URL, b.Weight, b.Line, w.url, w.weight, w.line)
		}
	}
	if c.Path != "../../examples/original.yml" {
		t.Errorf("path %q", c.Path)
	}
}

// TestDocumentedExampleMatchesDefaults keeps examples/config.yml honest: it
// spells out every key, and every value it shows is the default.
func TestDocumentedExampleMatchesDefaults(t *testing.T) {
	data, err := os.ReadFile("../../examples/config.yml")
	if err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, string(data))
	for _, k := range Keys() {
		if _, ok := c.lines[k]; !ok && k != "listen" { // listen is shown commented out: setting it changes meaning
			t.Errorf("examples/config.yml does not show %q", k)
		}
	}
	want := Default()
	got := *c
	got.Backends, got.Path = nil, ""
	if got.TrustedProxies != nil && len(got.TrustedProxies) == 0 {
		got.TrustedProxies = nil
	}
	got.listenSet, got.lines, got.flags, got.undecoded = false, nil, nil, nil
	if !reflect.DeepEqual(&got, want) {
		t.Errorf("examples/config.yml differs from Default():\n got  %+v\n want %+v", got, *want)
	}
}

func TestDefaults(t *testing.T) {
	c := mustParse(t, y("backends:", "  - http://127.0.0.1:8001"))
	checks := []struct {
		name      string
		got, want any
	}{
		{"listen", c.Listen, ":8080"},
		{"port", c.Port, 8080},
		{"algorithm", c.Algorithm, "round-robin"},
		{"weight", c.Backends[0].Weight, 1},
		{"health type", c.HealthCheck.Type, "http"},
		{"health path", c.HealthCheck.Path, "/health"},
		{"interval", c.HealthCheck.Interval, 10 * time.Second},
		{"timeout", c.HealthCheck.Timeout, 2 * time.Second},
		{"rise", c.HealthCheck.Rise, 2},
		{"fall", c.HealthCheck.Fall, 3},
		{"reuse check connections", c.HealthCheck.ReuseConnection, true},
		{"trusted proxies", len(c.TrustedProxies), 0},
		{"log file", c.LogFile, ""},
		{"log size", c.LogMaxSizeMB, 100},
		{"log backups", c.LogMaxBackups, 5},
		{"log age", c.LogMaxAgeDays, 0},
		{"log level", c.LogLevel, "info"},
		{"access log", c.AccessLog, true},
		{"connect timeout", c.ConnectTimeout, 5 * time.Second},
		{"response timeout", c.ResponseTimeout, 60 * time.Second},
		{"client header timeout", c.ClientHeaderTimeout, 10 * time.Second},
		{"idle timeout", c.IdleTimeout, 60 * time.Second},
		{"shutdown timeout", c.ShutdownTimeout, 30 * time.Second},
		{"idle conns", c.MaxIdleConnsPerBackend, 256},
		{"max connections", c.MaxConnections, 16384},
		{"retries", c.Retries, 2},
		{"workers", c.Workers, 0},
		{"processes", c.Processes, 1},
		{"cpu affinity", c.CPUAffinity, false},
		{"max header bytes", c.MaxHeaderBytes, 16384},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

// TestEmptyValueKeepsDefault: "key:" with nothing after it is YAML null,
// which leaves the default in place.
func TestEmptyValueKeepsDefault(t *testing.T) {
	c := mustParse(t, y("port:", "log_level: ~", "backends:", "  - url: http://127.0.0.1:8001", "    weight:"))
	if c.Port != DefaultPort || c.LogLevel != DefaultLogLevel || c.Backends[0].Weight != DefaultWeight {
		t.Errorf("port %d log_level %q weight %d", c.Port, c.LogLevel, c.Backends[0].Weight)
	}
}

func TestDurations(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  time.Duration
	}{
		{"integer seconds", "10", 10 * time.Second},
		{"fractional seconds", "0.5", 500 * time.Millisecond},
		{"quoted seconds", `"3"`, 3 * time.Second},
		{"exponent seconds", "1e1", 10 * time.Second},
		{"milliseconds", "500ms", 500 * time.Millisecond},
		{"seconds with unit", "2s", 2 * time.Second},
		{"compound", "1m30s", 90 * time.Second},
		{"quoted with unit", `"250ms"`, 250 * time.Millisecond},
		{"microseconds", "1500us", 1500 * time.Microsecond},
		{"hours", "1h", time.Hour},
		{"hex seconds", "0x10", 16 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, y("connect_timeout: "+tt.value, "backends:", "  - http://127.0.0.1:8001"))
			if c.ConnectTimeout != tt.want {
				t.Errorf("connect_timeout: %s gave %v, want %v", tt.value, c.ConnectTimeout, tt.want)
			}
		})
	}
}

func TestValues(t *testing.T) {
	c := mustParse(t, y(
		"listen: 127.0.0.1:9000",
		"port: 8081",
		"tls_min_version: \"1.3\"",
		"h2c: true",
		"algorithm: ip-hash",
		"health_check_type: tcp",
		"health_check_path: /ready?full=1",
		"health_check_interval: 5",
		"health_check_timeout: 500ms",
		"health_check_rise: 1",
		"health_check_fall: 5",
		"health_check_reuse_connection: false",
		"trusted_proxies: [10.1.2.3/8, 192.0.2.7, \"::1\", \"fd00::/8\"]",
		"log_file: /var/log/relay.log",
		"log_max_size_mb: 10",
		"log_max_backups: 0",
		"log_max_age_days: 7",
		"log_level: debug",
		"access_log: true",
		"access_log_file: /var/log/relay-access.log",
		"access_log_format: combined",
		"request_id: false",
		"connect_timeout: 1",
		"response_timeout: 2m",
		"client_header_timeout: 3",
		"idle_timeout: 4",
		"shutdown_timeout: 0",
		"max_idle_conns_per_backend: 0",
		"upstream_idle_timeout: 9s",
		"tunnel_idle_timeout: 90s",
		"client_body_timeout: 11s",
		"client_body_min_rate: 0",
		"max_body_bytes: 1000000",
		"body_buffer_bytes: 0",
		"max_connections: 10",
		"retries: 0",
		"workers: 1",
		"processes: 2",
		"cpu_affinity: true",
		"max_header_bytes: 8192",
		"breaker_failures: 7",
		"breaker_statuses: [502, 503]",
		"breaker_grpc_statuses: [14, 8]",
		"max_grpc_timeout: 30s",
		"protocol: h2c",
		"breaker_open_time: 10s",
		"max_ejected_percent: 34",
		"backend_max_requests: 100",
		"max_queued_requests: 50",
		"queue_timeout: 1s",
		"retry_budget_percent: 10",
		"retry_budget_floor: 1",
		"slow_start: 1m",
		"hash_key: header:X-User",
		"hash_balance_factor: 125",
		"admin_listen: 0.0.0.0:9902",
		"admin_token: 0123456789abcdef0123",
		"backends:",
		"  - url: http://LOCALHOST:8001/",
		"    weight: 1000",
		"    max_requests: 2",
		"  - http://[::1]",
		"  - url: http://example.com",
		"  - url: http://[fe80::1%25eth0]:8080",
	))
	want := Config{
		Pool: Pool{
			Algorithm:      "ip-hash",
			HealthCheck:    HealthCheck{Type: "tcp", Path: "/ready?full=1", Interval: 5 * time.Second, Timeout: 500 * time.Millisecond, Rise: 1, Fall: 5, ReuseConnection: false},
			ConnectTimeout: time.Second, ResponseTimeout: 2 * time.Minute, MaxIdleConnsPerBackend: 0, UpstreamIdleTimeout: 9 * time.Second, Retries: 0,
			BreakerFailures: 7, BreakerStatuses: []int{502, 503}, BreakerOpenTime: 10 * time.Second, MaxEjectedPercent: 34,
			BackendMaxRequests: 100, MaxQueuedRequests: 50, QueueTimeout: time.Second, RetryBudgetPercent: 10, RetryBudgetFloor: 1, SlowStart: time.Minute,
			Sticky:  defaultSticky(),
			HashKey: "header:X-User", HashBalanceFactor: 125,
			Protocol: "h2c", BreakerGRPCStatuses: []int{14, 8}, MaxGRPCTimeout: 30 * time.Second,
		},
		Listen: "127.0.0.1:9000", Port: 8081, TLSMinVersion: "1.3", H2C: true,
		TrustedProxies: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
			netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fd00::/8"),
		},
		LogFile: "/var/log/relay.log", LogMaxSizeMB: 10, LogMaxBackups: 0, LogMaxAgeDays: 7, LogLevel: "debug", AccessLog: true,
		AccessLogFile: "/var/log/relay-access.log", AccessLogFormat: "combined", RequestID: false,
		ClientHeaderTimeout: 3 * time.Second, IdleTimeout: 4 * time.Second,
		ShutdownTimeout: 0, TunnelIdleTimeout: 90 * time.Second, MaxConnections: 10, Workers: 1, Processes: 2, CPUAffinity: true, MaxHeaderBytes: 8192,
		ClientBodyTimeout: 11 * time.Second, ClientBodyMinRate: 0, MaxBodyBytes: 1000000, BodyBufferBytes: 0,
		AdminListen: "0.0.0.0:9902", AdminToken: "0123456789abcdef0123",
		EscapedSlashes: DefaultEscapedSlashes,
	}
	got := *c
	gotBackends := got.Backends
	got.Backends, got.Path, got.listenSet, got.lines, got.flags, got.undecoded = nil, "", false, nil, nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	wantBackends := []struct {
		url    string
		weight int
	}{{"http://localhost:8001", 1000}, {"http://[::1]:80", 1}, {"http://example.com:80", 1}, {"http://[fe80::1%25eth0]:8080", 1}}
	if gotBackends[0].MaxRequests != 2 || gotBackends[1].MaxRequests != 0 {
		t.Errorf("max_requests %d and %d, want 2 and 0", gotBackends[0].MaxRequests, gotBackends[1].MaxRequests)
	}
	for i, w := range wantBackends {
		if b := gotBackends[i]; b.URL.String() != w.url || b.Weight != w.weight {
			t.Errorf("backend %d: %s weight %d, want %s weight %d", i, b.URL, b.Weight, w.url, w.weight)
		}
	}
}

// TestListenWinsOverPort: a listen address in the file is used as given,
// whatever port says.
func TestListenWinsOverPort(t *testing.T) {
	c := mustParse(t, y("port: 9000", "listen: 127.0.0.1:7000", "backends:", "  - http://127.0.0.1:8001"))
	if c.Listen != "127.0.0.1:7000" {
		t.Errorf("listen %q", c.Listen)
	}
	c = mustParse(t, y("port: 9000", "backends:", "  - http://127.0.0.1:8001"))
	if c.Listen != ":9000" {
		t.Errorf("listen %q, want :9000 from port", c.Listen)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("does-not-exist.yml", testOpts)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want a not-exist error", err)
	}
}

// TestValidateBuiltInCode: a Config assembled in code gets the same checks,
// with keys but no lines.
func TestValidateBuiltInCode(t *testing.T) {
	c := Default()
	if err := c.Validate(testOpts); err == nil {
		t.Fatal("default config without backends validated")
	}
	u := mustURL(t, "http://127.0.0.1:8001")
	c.Backends = []Backend{{URL: u, Weight: 1}, {URL: u, Weight: 0}}
	c.HealthCheck.Rise = 0
	c.Backends = append(c.Backends, Backend{URL: &url.URL{Scheme: "http", Host: "::1:80"}, Weight: 1})
	ps := problems(t, c.Validate(testOpts))
	want := []string{
		`backends[2].url: "http://::1:80": an IPv6 address needs brackets`,
		"health_check_rise: must be at least 1, got 0",
		"backends[1].weight: weight 0 is below 1",
		`backends[1].url: "http://127.0.0.1:8001" duplicates the backend at backends[0]`,
	}
	if len(ps) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(want), &Errors{ps})
	}
	for _, w := range want {
		found := false
		for _, p := range ps {
			if len(p.String()) >= len(w) && p.String()[:len(w)] == w {
				found = true
			}
		}
		if !found {
			t.Errorf("missing %q in\n%v", w, &Errors{ps})
		}
	}
}

// A file that sets only health_check_interval, shorter than the default
// timeout, loads with the timeout following the interval; a timeout the
// file sets is still held to the interval.
func TestHealthCheckTimeoutFollowsTheInterval(t *testing.T) {
	c, err := Parse([]byte("health_check_interval: 2s\nbackends:\n  - http://127.0.0.1:8001\n"), "relay.yml", Options{})
	if err != nil {
		t.Fatalf("a file setting only health_check_interval: 2s: %v", err)
	}
	if c.HealthCheck.Timeout != time.Second {
		t.Fatalf("health_check_timeout %v, want 1s (half the interval)", c.HealthCheck.Timeout)
	}
	if c, err := Parse([]byte("health_check_interval: 10s\nbackends:\n  - http://127.0.0.1:8001\n"), "relay.yml", Options{}); err != nil || c.HealthCheck.Timeout != DefaultHealthCheckTimeout {
		t.Fatalf("an interval longer than the default timeout: timeout %v (%v), want the default %v", c.HealthCheck.Timeout, err, DefaultHealthCheckTimeout)
	}
	_, err = Parse([]byte("health_check_interval: 2s\nhealth_check_timeout: 2s\nbackends:\n  - http://127.0.0.1:8001\n"), "relay.yml", Options{})
	if err == nil || !strings.Contains(err.Error(), "relay.yml:2") || !strings.Contains(err.Error(), "must be shorter than health_check_interval") {
		t.Fatalf("a timeout the file sets equal to the interval: %v; want relay.yml:2 saying it must be shorter", err)
	}
}
