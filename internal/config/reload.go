package config

import (
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// LiveKeys are the settings a reload applies while relay serves: the
// backends, the pool's settings and the log level. Every other setting
// takes effect when relay restarts.
var LiveKeys = []string{
	"backends", "discovery", "algorithm", "retries", "connect_timeout", "response_timeout",
	"max_idle_conns_per_backend", "upstream_idle_timeout",
	"breaker_failures", "breaker_statuses", "breaker_open_time", "max_ejected_percent",
	"backend_max_requests", "max_queued_requests", "queue_timeout",
	"retry_budget_percent", "retry_budget_floor", "slow_start", "log_level",
	"tls_certificates", "tls_min_version",
	"backend_tls_ca_file", "backend_tls_server_name", "backend_tls_client_cert_file",
	"backend_tls_client_key_file", "backend_tls_insecure_skip_verify",
}

// RestartOnly lists the keys, in the order examples/config.yml shows
// them, whose values differ between the configuration relay runs and a
// reloaded one but that a reload does not apply, so the log can name
// them instead of ignoring them silently.
func RestartOnly(running, next *Config) []string {
	return changedKeys(running, next, func(k string) bool { return !slices.Contains(LiveKeys, k) })
}

// Changed lists the keys, in the order examples/config.yml shows them,
// whose values differ between two configurations, backends left out: the
// reload line names the backends that changed one by one.
func Changed(before, after *Config) []string {
	return changedKeys(before, after, func(k string) bool { return k != "backends" })
}

// changedKeys lists the keys, in the order examples/config.yml shows
// them, whose values differ between a and b and that keep accepts.
func changedKeys(a, b *Config, keep func(string) bool) []string {
	changed := map[string]bool{}
	diff(reflect.ValueOf(*a), reflect.ValueOf(*b), "", changed)
	var keys []string
	for _, k := range Keys() {
		if changed[k] && keep(k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// diff marks the key of every exported field that differs between a and
// b; the fields of a nested struct (HealthCheck) take its name as a prefix,
// unless the struct is a section of its own (discovery).
func diff(a, b reflect.Value, prefix string, changed map[string]bool) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Name == "Path" && prefix == "" {
			continue
		}
		key := prefix + snake(f.Name)
		if flattened(t, f, key) {
			diff(a.Field(i), b.Field(i), key+"_", changed)
			continue
		}
		if !sameSetting(a.Field(i), b.Field(i)) {
			changed[key] = true
		}
	}
}

// sameSetting reports whether two values of a setting are the same,
// wherever in the file they stand: certificates moved to other lines
// (Certificate.Line) are the same certificates.
func sameSetting(a, b reflect.Value) bool {
	if ca, ok := a.Interface().([]Certificate); ok {
		return slices.EqualFunc(ca, b.Interface().([]Certificate), func(x, y Certificate) bool {
			return x.CertFile == y.CertFile && x.KeyFile == y.KeyFile
		})
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// snake turns a Go field name into its YAML key: MaxIdleConnsPerBackend
// is max_idle_conns_per_backend, CPUAffinity cpu_affinity.
func snake(name string) string {
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if i > 0 && unicode.IsUpper(r) && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// flattened reports whether field f of t is a struct whose fields are
// top-level keys of their own (HealthCheck's health_check_interval, ...)
// rather than a section read under one key (discovery).
func flattened(t reflect.Type, f reflect.StructField, key string) bool {
	return f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == t.PkgPath() && !slices.Contains(Keys(), key)
}
