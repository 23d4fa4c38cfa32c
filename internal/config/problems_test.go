package config

import (
	"strings"
	"testing"
)

// TestProblems feeds files with exactly one mistake each and checks that it
// is the only problem, found on the right line under the right key.
func TestProblems(t *testing.T) {
	const b1 = "  - url: http://127.0.0.1:8001"
	tests := []problemCase{
		// Keys.
		{"unknown top-level key", y("prot: 8080", "backends:", b1), 1, "prot", `unknown key; did you mean "port"?`},
		{"unknown key without suggestion", y("backends:", b1, "colour: blue"), 3, "colour", "unknown key"},
		{"unknown key in backend", y("backends:", b1, "    wieght: 2"), 3, "backends[0].wieght", `unknown key; did you mean "weight"?`},
		{"key set twice", y("port: 80", "backends:", b1, "port: 81"), 4, "port", "set twice (first at line 1)"},
		{"merge key", y("<<: {port: 80}", "backends:", b1), 1, "<<", "merge keys (<<) are not supported"},

		// Backend URLs.
		{"url without scheme", y("backends:", "  - url: localhost:8001"), 2, "backends[0].url", `"localhost:8001" has no scheme; write "http://localhost:8001"`},
		{"ip without scheme", y("backends:", "  - url: 127.0.0.1:8001"), 2, "backends[0].url", `write "http://127.0.0.1:8001"`},
		{"url without host", y("backends:", "  - url: http://"), 2, "backends[0].url", `"http://": no host`},
		{"url with port only", y("backends:", "  - url: http://:8001"), 2, "backends[0].url", "no host"},
		{"tls key on an http backend", y("backends:", b1, "    tls_server_name: api.internal"), 3, "backends[0].tls_server_name", "tls_server_name applies to https backends only; this one is http"},
		{"tls client cert without key", y("backends:", "  - url: https://127.0.0.1:8443", "    tls_client_cert_file: /x.pem"), 3, "backends[0].tls_client_cert_file", "tls_client_cert_file is set without tls_client_key_file"},
		{"tls ca file missing", y("backend_tls_ca_file: /nonexistent/ca.pem", "backends:", b1), 1, "backend_tls_ca_file", `CA file "/nonexistent/ca.pem": no such file`},
		{"tls insecure not a bool", y("backends:", "  - url: https://127.0.0.1:8443", "    tls_insecure_skip_verify: maybe"), 3, "backends[0].tls_insecure_skip_verify", "must be true or false"},
		{"other scheme", y("backends:", "  - url: ftp://127.0.0.1:21"), 2, "backends[0].url", `scheme "ftp" is not supported; use http`},
		{"url with path", y("backends:", "  - url: http://127.0.0.1:8001/api"), 2, "backends[0].url", `a path ("/api") is not supported`},
		{"url with query", y("backends:", "  - url: http://127.0.0.1:8001?x=1"), 2, "backends[0].url", `a query ("?x=1") is not supported`},
		{"url with fragment", y("backends:", "  - url: http://127.0.0.1:8001#top"), 2, "backends[0].url", `a fragment ("#top") is not supported`},
		{"url with credentials", y("backends:", "  - url: http://bob:pw@127.0.0.1:8001"), 2, "backends[0].url", "credentials in backend URLs are not supported"},
		{"url port out of range", y("backends:", "  - url: http://127.0.0.1:70000"), 2, "backends[0].url", `port "70000" is out of range 1-65535`},
		{"ipv6 without brackets", y("backends:", "  - url: http://::1:8001"), 2, "backends[0].url", "an IPv6 address needs brackets"},
		{"ipv6 zone not a name", y("backends:", "  - url: http://[fe80::1%25a%20b]:80"), 2, "backends[0].url", `host "fe80::1%a b" is not a valid host name`},
		{"url bad host", y("backends:", "  - url: http://exa!mple:80"), 2, "backends[0].url", `host "exa!mple" is not a valid host name`},
		{"url unparsable", y("backends:", "  - url: http://[::1"), 2, "backends[0].url", "is not a valid URL"},
		{"url empty", y("backends:", `  - url: ""`), 2, "backends[0].url", "backend URL is empty"},
		{"url not a string", y("backends:", "  - url: 8001"), 2, "backends[0].url", `must be a string, got "8001"`},
		{"backend with empty url", y("backends:", b1, "  - url:", "    weight: 2"), 3, "backends[1]", "missing url"},
		{"backend without url", y("backends:", b1, "  - weight: 2"), 3, "backends[1]", "missing url"},
		{"backend entry is a list", y("backends:", b1, "  - [1, 2]"), 3, "backends[1]", "must be a mapping with url and weight, got a list"},
		{"backends not a list", y("backends: http://127.0.0.1:8001"), 1, "backends", "must be a list of backends"},

		// Weights.
		{"weight zero", y("backends:", b1, "    weight: 0"), 3, "backends[0].weight", "weight 0 is below 1"},
		{"weight negative", y("backends:", b1, "    weight: -4"), 3, "backends[0].weight", "weight -4 is below 1"},
		{"weight too large", y("backends:", b1, "    weight: 1001"), 3, "backends[0].weight", "weight 1001 is above the maximum 1000"},
		{"weight not a number", y("backends:", b1, `    weight: "abc"`), 3, "backends[0].weight", `must be a whole number, got "abc"`},
		{"weight a fraction", y("backends:", b1, "    weight: 1.5"), 3, "backends[0].weight", `must be a whole number, got "1.5"`},

		// Request caps split over serving processes.
		{"backend cap below processes", y("processes: 3", "backends:", b1, "    max_requests: 2"), 4, "backends[0].max_requests", "2 cannot be split over 3 serving processes"},
		{"default cap below processes", y("processes: 2", "backend_max_requests: 1", "backends:", b1), 2, "backend_max_requests", "1 cannot be split over 2 serving processes"},

		// Duplicates: the second entry is the one reported.
		{"duplicate backend", y("backends:", b1, b1), 3, "backends[1].url", `duplicates the backend at line 2 (both are http://127.0.0.1:8001)`},
		{"duplicate after normalising", y("backends:", "  - url: http://localhost", "  - url: HTTP://LocalHost:80/"), 3, "backends[1].url", "duplicates the backend at line 2 (both are http://localhost:80)"},
		{"duplicate ipv6 spelled differently", y("backends:", "  - url: http://[::1]:8001", "  - url: http://[0:0::1]:8001"), 3, "backends[1].url", "both are http://[::1]:8001"},
		{"duplicate as bare string", y("backends:", b1, "  - http://127.0.0.1:8001"), 3, "backends[1].url", "duplicates the backend at line 2"},

		// Algorithm.
		{"unknown algorithm", y("algorithm: fastest", "backends:", b1), 1, "algorithm", `unknown algorithm "fastest"; known: round-robin, roundrobin, weighted-round-robin`},
		{"empty algorithm", y(`algorithm: ""`, "backends:", b1), 1, "algorithm", "must not be empty"},
		{"algorithm not a string", y("algorithm: [a]", "backends:", b1), 1, "algorithm", "must be a string, got a list"},

		// Port and listen.
		{"port zero", y("port: 0", "backends:", b1), 1, "port", "must be between 1 and 65535, got 0"},
		{"port too large", y("port: 65536", "backends:", b1), 1, "port", "must be between 1 and 65535, got 65536"},
		{"port negative", y("port: -1", "backends:", b1), 1, "port", "must not be negative, got -1"},
		{"port quoted", y(`port: "8080"`, "backends:", b1), 1, "port", `must be a whole number, got "8080"`},
		{"listen without port", y("listen: localhost", "backends:", b1), 1, "listen", `"localhost" is not HOST:PORT`},
		{"listen port out of range", y("listen: 127.0.0.1:99999", "backends:", b1), 1, "listen", `port "99999" in "127.0.0.1:99999" is not a number from 0 to 65535`},
		{"listen bad host", y("listen: a/b:80", "backends:", b1), 1, "listen", `host "a/b"`},

		// No backends.
		{"no backends key", y("port: 8080"), 0, "backends", "no backends configured"},
		{"empty backends list", y("port: 8080", "backends: []"), 2, "backends", "no backends configured"},
		{"null backends", y("port: 8080", "backends:"), 2, "backends", "no backends configured"},
		{"empty file", "", 0, "backends", "no backends configured"},
		{"comments only", y("# nothing here"), 0, "backends", "no backends configured"},

		// Health checks.
		{"timeout equal to interval", y("health_check_interval: 2", "health_check_timeout: 2s", "backends:", b1), 2, "health_check_timeout", "health_check_timeout (2s) must be shorter than health_check_interval (2s)"},
		{"timeout longer than default interval", y("health_check_timeout: 15", "backends:", b1), 1, "health_check_timeout", "must be shorter than health_check_interval (10s)"},
		{"interval zero", y("health_check_interval: 0", "health_check_timeout: 0.1", "backends:", b1), 1, "health_check_interval", "must be longer than zero"},
		{"interval negative", y("health_check_interval: -5s", "backends:", b1), 1, "health_check_interval", "must not be negative, got -5s"},
		{"bad check type", y("health_check_type: udp", "backends:", b1), 1, "health_check_type", `must be "http", "tcp" or "grpc", got "udp"`},
		{"path without slash", y("health_check_path: health", "backends:", b1), 1, "health_check_path", `must start with "/", got "health"`},
		{"path with space", y(`health_check_path: "/he alth"`, "backends:", b1), 1, "health_check_path", "percent-encode it"},
		{"rise zero", y("backends:", b1, "health_check_rise: 0"), 3, "health_check_rise", "must be at least 1, got 0"},
		{"fall zero", y("backends:", b1, "health_check_fall: 0"), 3, "health_check_fall", "must be at least 1, got 0"},
		{"fall negative", y("backends:", b1, "health_check_fall: -2"), 3, "health_check_fall", "must not be negative, got -2"},

		// Durations.
		{"duration with a space", y("connect_timeout: 10 s", "backends:", b1), 1, "connect_timeout", `"10 s": not a duration`},
		{"duration word", y("connect_timeout: soon", "backends:", b1), 1, "connect_timeout", `"soon": not a duration: use seconds (10, 0.5) or a unit (500ms, 2s)`},
		{"duration negative seconds", y("response_timeout: -5", "backends:", b1), 1, "response_timeout", "must not be negative, got -5s"},
		{"duration zero", y("idle_timeout: 0", "backends:", b1), 1, "idle_timeout", "must be longer than zero"},
		{"duration infinite", y("idle_timeout: .inf", "backends:", b1), 1, "idle_timeout", "not a duration"},
		{"duration too large", y("idle_timeout: 1e300", "backends:", b1), 1, "idle_timeout", "duration is too large"},
		{"duration a list", y("idle_timeout: [1]", "backends:", b1), 1, "idle_timeout", "must be a duration such as 10 (seconds), 0.5, 500ms or 2s, got a list"},
		{"shutdown negative", y("shutdown_timeout: -1s", "backends:", b1), 1, "shutdown_timeout", "must not be negative, got -1s"},

		// Other numbers.
		{"retries negative", y("retries: -1", "backends:", b1), 1, "retries", "must not be negative, got -1"},
		{"retries beyond the tries remembered", y("retries: 8", "backends:", b1), 1, "retries", "must be between 0 and 7, got 8"},
		{"retries near MaxInt", y("retries: 9223372036854775807", "backends:", b1), 1, "retries", "must be between 0 and 7, got 9223372036854775807"},
		{"workers negative", y("workers: -2", "backends:", b1), 1, "workers", "must not be negative, got -2"},
		{"processes negative", y("processes: -1", "backends:", b1), 1, "processes", "must not be negative, got -1"},
		{"processes too many", y("processes: 1000", "backends:", b1), 1, "processes", "must be between 0 and 256, got 1000"},
		{"max connections zero", y("max_connections: 0", "backends:", b1), 1, "max_connections", "must be at least 1, got 0"},
		{"idle conns negative", y("max_idle_conns_per_backend: -1", "backends:", b1), 1, "max_idle_conns_per_backend", "must not be negative"},
		{"header bytes too small", y("max_header_bytes: 100", "backends:", b1), 1, "max_header_bytes", "must be between 1024 and 1048576, got 100"},
		{"log size zero", y("log_max_size_mb: 0", "backends:", b1), 1, "log_max_size_mb", "must be at least 1, got 0"},
		{"log backups negative", y("log_max_backups: -1", "backends:", b1), 1, "log_max_backups", "must not be negative"},
		{"log age negative", y("log_max_age_days: -7", "backends:", b1), 1, "log_max_age_days", "must not be negative"},
		{"number too large", y("retries: 99999999999999999999999", "backends:", b1), 1, "retries", "must be a whole number"},
		{"number beyond int", y("retries: 18446744073709551615", "backends:", b1), 1, "retries", `"18446744073709551615" is too large`},
		{"long value shortened", y("log_level: "+strings.Repeat("x", 100), "backends:", b1), 1, "log_level", `got "` + strings.Repeat("x", 60) + `"...`},
		{"long wrong-type value shortened", y("retries: "+strings.Repeat("x", 100), "backends:", b1), 1, "retries", `got "` + strings.Repeat("x", 60) + `"...`},

		// Logging and the rest.
		{"bad log level", y("log_level: verbose", "backends:", b1), 1, "log_level", `must be one of debug, info, warn, error; got "verbose"`},
		{"access log not a bool", y("access_log: yes", "backends:", b1), 1, "access_log", `must be true or false, got "yes"`},
		{"access log format unknown", y("access_log_format: clf", "backends:", b1), 1, "access_log_format", `must be "json" or "combined", got "clf"`},
		{"access log file with access log off", y("access_log: false", "access_log_file: /tmp/a.log", "backends:", b1), 2, "access_log_file", "access_log is false, so nothing would be written to it"},
		{"access log file is the log file", y("log_file: /tmp/relay.log", "access_log_file: /tmp/./relay.log", "backends:", b1), 2, "access_log_file", `is log_file ("/tmp/relay.log"); leave access_log_file empty`},
		{"request id not a bool", y("request_id: on", "backends:", b1), 1, "request_id", `must be true or false, got "on"`},
		{"cpu affinity with one process", y("cpu_affinity: true", "backends:", b1), 1, "cpu_affinity", "needs processes other than 1"},
		{"reuse not a bool", y("health_check_reuse_connection: 1", "backends:", b1), 1, "health_check_reuse_connection", `must be true or false, got "1"`},
		{"log file not a string", y("log_file: {a: 1}", "backends:", b1), 1, "log_file", "must be a string, got a mapping"},
		{"bad cidr", y("trusted_proxies: [10.0.0.0/8, 10.0.0.0/33]", "backends:", b1), 1, "trusted_proxies[1]", `"10.0.0.0/33" is not a CIDR range`},
		{"bad proxy address", y("trusted_proxies:", "  - proxy.local", "backends:", b1), 2, "trusted_proxies[0]", `"proxy.local" is not an IP address or a CIDR range`},
		{"proxy with zone", y("trusted_proxies: [\"fe80::1%eth0\"]", "backends:", b1), 1, "trusted_proxies[0]", "zones are not supported"},
		{"proxies not a list", y("trusted_proxies: 10.0.0.0/8", "backends:", b1), 1, "trusted_proxies", "must be a list"},

		// YAML itself.
		{"syntax error", y("port: 8080", "backends:", `  - url: "http://127.0.0.1:8001`), 3, "", "invalid YAML: found unexpected end of stream"},
		{"syntax error mid-file", y("port: 8080", "backends: [", "  - url: x"), 2, "", "invalid YAML: did not find expected node content"},
		{"tab indentation", y("backends:", "\t- url: http://127.0.0.1:8001"), 2, "", "invalid YAML: found character that cannot start any token"},
		{"top level a list", y("- port: 8080"), 1, "", "the top level must be a mapping of settings"},
		{"two documents", y("backends:", b1, "---", "port: 9"), 3, "", "more than one YAML document"},
		{"unknown anchor", y("backends: *nowhere"), 0, "", "invalid YAML: unknown anchor 'nowhere' referenced"},
		{"non-scalar key in backend", y("backends:", b1, "    {a: 1}: 2"), 3, "backends[0]", "keys must be plain names, got a mapping"},
		{"non-scalar key", y("[a]: 1", "backends:", b1), 1, "", "keys must be plain names, got a list"},

		// The admin listener.
		{"admin beyond loopback without token", y("admin_listen: 0.0.0.0:9901", "backends:", b1), 1, "admin_listen", `"0.0.0.0:9901" is reachable beyond this machine, so the admin API needs admin_token`},
		{"admin on all interfaces without token", y("admin_listen: :9901", "backends:", b1), 1, "admin_listen", "needs admin_token"},
		{"admin token too short", y("admin_listen: 0.0.0.0:9901", "admin_token: secret", "backends:", b1), 2, "admin_token", "must be at least 16 characters, got 6"},
		{"admin listen not host:port", y("admin_listen: localhost", "backends:", b1), 1, "admin_listen", `"localhost" is not HOST:PORT`},
		{"admin listen is the client listen", y("listen: 127.0.0.1:8080", "admin_listen: 127.0.0.1:8080", "backends:", b1), 2, "admin_listen", "never shared with client traffic"},

		// Discovery.
		{"discovery not a mapping", y("discovery: etcd"), 1, "discovery", "must be a mapping"},
		{"discovery unknown source", y("discovery:", "  consul: {}"), 2, "discovery.consul", "unknown key"},
		{"etcd without endpoints", y("discovery:", "  etcd:", "    prefix: /relay/backends/"), 2, "discovery.etcd.endpoints", "missing: list the cluster's client URLs"},
		{"etcd without prefix", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]"), 2, "discovery.etcd.prefix", "missing: the key prefix"},
		{"etcd empty prefix", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", `    prefix: ""`), 4, "discovery.etcd.prefix", "must not be empty"},
		{"etcd endpoint without scheme", y("discovery:", "  etcd:", "    endpoints: [127.0.0.1:2379]", "    prefix: /b/"), 3, "discovery.etcd.endpoints[0]", `has no scheme; write http://127.0.0.1:2379`},
		{"etcd endpoint with a path", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379/v3]", "    prefix: /b/"), 3, "discovery.etcd.endpoints[0]", "must be just scheme://HOST:PORT"},
		{"etcd endpoint unix", y("discovery:", "  etcd:", "    endpoints: [unix://x:1]", "    prefix: /b/"), 3, "discovery.etcd.endpoints[0]", "the scheme must be http or https"},
		{"etcd dial timeout zero", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /b/", "    dial_timeout: 0s"), 5, "discovery.etcd.dial_timeout", "must be longer than zero"},
		{"etcd username without password", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /b/", "    username: relay"), 5, "discovery.etcd.username", "username is set without password"},
		{"etcd tls on http endpoints", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /b/", "    tls_server_name: etcd.internal"), 2, "discovery.etcd.endpoints", "no endpoint is https://"},
		{"etcd unknown key", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /b/", "    prefx: /c/"), 5, "discovery.etcd.prefx", `unknown key; did you mean "prefix"?`},
		{"announce without url", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /b/", "    announce:", "      prefix: /i/"), 5, "discovery.etcd.announce.url", "missing: announce needs url"},
		{"announce bad url", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /b/", "    announce:", "      url: 10.0.0.1:8080", "      prefix: /i/"), 6, "discovery.etcd.announce.url", "has no scheme"},
		{"announce ttl too short", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /b/", "    announce:", "      url: http://10.0.0.1:8080", "      prefix: /i/", "      ttl: 1s"), 8, "discovery.etcd.announce.ttl", "too short"},
		{"announce weight zero", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /b/", "    announce:", "      url: http://10.0.0.1:8080", "      prefix: /i/", "      weight: 0"), 8, "discovery.etcd.announce.weight", "0 is outside 1..1000"},
		{"announce under the watched prefix", y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /relay/", "    announce:", "      url: http://10.0.0.1:8080", "      prefix: /relay/instances/"), 7, "discovery.etcd.announce.prefix", "relay would discover itself"},
		{"etcd tls key without cert", y("discovery:", "  etcd:", "    endpoints: [https://127.0.0.1:2379]", "    prefix: /b/", "    tls_client_key_file: /x.pem"), 5, "discovery.etcd.tls_client_key_file", "tls_client_key_file is set without tls_client_cert_file"},
		{"etcd endpoints empty", y("discovery:", "  etcd:", "    endpoints: []", "    prefix: /b/"), 3, "discovery.etcd.endpoints", "is empty"},
		{"etcd endpoints mixed", y("discovery:", "  etcd:", "    endpoints: [http://10.0.0.1:2379, https://10.0.0.2:2379]", "    prefix: /b/"), 3, "discovery.etcd.endpoints", "mixes http:// and https://"},
	}
	checkProblems(t, tests)
}

// problemCase is a file with one mistake and the problem it must get:
// its line, its key and a part of its message.
type problemCase struct {
	name string
	yaml string
	line int
	key  string
	msg  string
}

// checkProblems parses each case's file as test.yml and checks that it
// gets exactly its one problem.
func checkProblems(t *testing.T, tests []problemCase) {
	t.Helper()
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

// TestProblemsReportedTogether checks that one file with many mistakes gets
// them all back, in line order, as one line each.
func TestAdminListenAccepted(t *testing.T) {
	for _, tt := range []struct{ name, yaml string }{
		{"loopback without token", y("admin_listen: 127.0.0.1:9901", "backends:", "  - http://127.0.0.1:8001")},
		{"localhost without token", y("admin_listen: localhost:9901", "backends:", "  - http://127.0.0.1:8001")},
		{"ipv6 loopback without token", y(`admin_listen: "[::1]:9901"`, "backends:", "  - http://127.0.0.1:8001")},
		{"off", y(`admin_listen: ""`, "backends:", "  - http://127.0.0.1:8001")},
		{"everywhere with a token", y("admin_listen: 0.0.0.0:9901", "admin_token: 0123456789abcdef", "backends:", "  - http://127.0.0.1:8001")},
	} {
		t.Run(tt.name, func(t *testing.T) { mustParse(t, tt.yaml) })
	}
}

func TestProblemsReportedTogether(t *testing.T) {
	src := y(
		"port: 70000",                     // 1
		"algoritm: round-robin",           // 2
		"speed: fast",                     // 3
		"health_check_interval: 1s",       // 4
		"health_check_timeout: 5s",        // 5
		"backends:",                       // 6
		"  - url: localhost:8001",         // 7
		"  - url: ftp://127.0.0.1:8443",   // 8
		"    weight: 0",                   // 9
		"  - url: http://127.0.0.1:8001",  // 10
		"    colour: red",                 // 11
		"  - url: http://127.0.0.1:8001/", // 12
		"trusted_proxies: [300.0.0.1]",    // 13
		"log_level: loud",                 // 14
		"workers: -1",                     // 15
		"connect_timeout: 5 seconds",      // 16
	)
	_, err := Parse([]byte(src), "relay.yml", testOpts)
	want := []string{
		"relay.yml:1: port: must be between 1 and 65535, got 70000",
		`relay.yml:2: algoritm: unknown key; did you mean "algorithm"?`,
		"relay.yml:3: speed: unknown key",
		"relay.yml:5: health_check_timeout: health_check_timeout (5s) must be shorter than health_check_interval (1s)",
		`relay.yml:7: backends[0].url: "localhost:8001" has no scheme; write "http://localhost:8001"`,
		`relay.yml:8: backends[1].url: "ftp://127.0.0.1:8443": scheme "ftp" is not supported; use http or https`,
		"relay.yml:9: backends[1].weight: weight 0 is below 1",
		`relay.yml:11: backends[2].colour: unknown key`,
		`relay.yml:12: backends[3].url: "http://127.0.0.1:8001/" duplicates the backend at line 10`,
		`relay.yml:13: trusted_proxies[0]: "300.0.0.1" is not an IP address`,
		`relay.yml:14: log_level: must be one of debug, info, warn, error; got "loud"`,
		"relay.yml:15: workers: must not be negative, got -1",
		`relay.yml:16: connect_timeout: "5 seconds": not a duration`,
	}
	ps := problems(t, err)
	lines := strings.Split(err.Error(), "\n")
	if len(ps) != len(want) || len(lines) != len(want) {
		t.Fatalf("got %d problems in %d lines, want %d:\n%v", len(ps), len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d:\n got  %s\n want %s...", i, lines[i], w)
		}
	}
}

// TestAllBadBackendsNotAlsoEmpty: when every entry is rejected, saying "no
// backends" on top would send the operator looking for a missing section.
func TestAllBadBackendsNotAlsoEmpty(t *testing.T) {
	_, err := Parse([]byte(y("backends:", "  - url: a:1", "  - url: b:2")), "x.yml", testOpts)
	ps := problems(t, err)
	if len(ps) != 2 {
		t.Fatalf("got %d problems, want 2:\n%v", len(ps), err)
	}
	for _, p := range ps {
		if strings.Contains(p.Msg, "no backends") {
			t.Errorf("unexpected %q", p)
		}
	}
}

func TestProblemString(t *testing.T) {
	tests := []struct {
		name string
		p    Problem
		want string
	}{
		{"everything", Problem{File: "a.yml", Line: 3, Key: "port", Msg: "bad"}, "a.yml:3: port: bad"},
		{"no line", Problem{File: "a.yml", Key: "backends", Msg: "none"}, "a.yml: backends: none"},
		{"flags", Problem{File: FlagsFile, Key: "-port", Msg: "bad"}, "flags: -port: bad"},
		{"no file", Problem{Line: 2, Key: "port", Msg: "bad"}, "line 2: port: bad"},
		{"no key", Problem{File: "a.yml", Line: 9, Msg: "invalid YAML: x"}, "a.yml:9: invalid YAML: x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAlgorithmsUnrestricted: without a list of names any non-empty one
// passes, leaving the check to whoever builds the picker.
func TestAlgorithmsUnrestricted(t *testing.T) {
	c, err := Parse([]byte(y("algorithm: my-own", "backends:", "  - http://127.0.0.1:1")), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Algorithm != "my-own" {
		t.Errorf("algorithm %q", c.Algorithm)
	}
}
