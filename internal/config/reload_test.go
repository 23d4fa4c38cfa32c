package config

import (
	"reflect"
	"slices"
	"testing"
)

// newLiveKeys are the live keys that came with named pools and routes,
// and after them (the upstream protocol and gRPC keys).
var newLiveKeys = []string{"pools", "routes", "escaped_slashes", "sticky", "hash_key", "hash_balance_factor",
	"protocol", "breaker_grpc_statuses", "max_grpc_timeout", "compress", "compress_memory_mb",
	"client_auth", "client_cert_headers", "client_cert_pem", "acme.domains"}

// TestEveryFieldHasItsKey keeps RestartOnly honest: each exported field of
// Config, those of the embedded Pool included, maps to a key relay reads,
// so a changed setting is always named.
func TestEveryFieldHasItsKey(t *testing.T) {
	keys := Keys()
	fields := 0
	walkSettings(reflect.TypeOf(Config{}), "", false, nil, func(key string, _ bool, index []int) {
		fields++
		if !slices.Contains(keys, key) {
			t.Errorf("field %s maps to %q, which is not a key", reflect.TypeOf(Config{}).FieldByIndex(index).Name, key)
		}
	})
	if fields < len(keys) {
		t.Errorf("%d setting fields for %d keys", fields, len(keys))
	}
}

// TestLiveKeysFromTags: the keys the reload:"live" tags declare are the
// ones a reload applied before the tags (the list below, as it was
// written by hand), and the new sections, pools and routes and
// escaped_slashes.
func TestLiveKeysFromTags(t *testing.T) {
	before := []string{
		"backends", "discovery", "algorithm", "retries", "connect_timeout", "response_timeout",
		"max_idle_conns_per_backend", "upstream_idle_timeout",
		"breaker_failures", "breaker_statuses", "breaker_open_time", "max_ejected_percent",
		"backend_max_requests", "max_queued_requests", "queue_timeout",
		"retry_budget_percent", "retry_budget_floor", "slow_start", "rate_limit", "log_level",
		"tls_certificates", "tls_min_version",
		"backend_tls_ca_file", "backend_tls_server_name", "backend_tls_client_cert_file",
		"backend_tls_client_key_file", "backend_tls_insecure_skip_verify",
	}
	want := append(before, newLiveKeys...)
	got := slices.Clone(LiveKeys)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("LiveKeys = %q\nwant      %q", got, want)
	}
	// In the order of settingKeys (Keys and the keys inside split
	// sections), which the reload line follows.
	if !slices.IsSortedFunc(LiveKeys, func(a, b string) int {
		return slices.Index(settingKeys(), a) - slices.Index(settingKeys(), b)
	}) {
		t.Errorf("LiveKeys %q are not in the order of settingKeys", LiveKeys)
	}
}

func TestRestartOnlyNamesChangedSettings(t *testing.T) {
	a := mustParse(t, y("listen: 127.0.0.1:8080", "processes: 1", "backends:", "  - http://127.0.0.1:8001"))
	b := mustParse(t, y("listen: 127.0.0.1:9090", "processes: 2", "health_check_interval: 3s",
		"backends:", "  - http://127.0.0.1:8001", "  - http://127.0.0.1:8002"))
	got := RestartOnly(a, b)
	want := []string{"listen", "health_check_interval", "processes"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RestartOnly = %v, want %v (backends apply live)", got, want)
	}
	if got := RestartOnly(a, a); len(got) != 0 {
		t.Fatalf("RestartOnly of the same configuration = %v, want none", got)
	}
}
