package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// field is one top-level YAML key and how its value lands in a Config.
type field struct {
	key string
	set func(d *decoder, c *Config, v *yaml.Node)
}

func strField(key string, p func(*Config) *string) field {
	return field{key, func(d *decoder, c *Config, v *yaml.Node) {
		if s, ok := d.str(v, key); ok {
			*p(c) = s
		}
	}}
}

func intField(key string, p func(*Config) *int) field {
	return field{key, func(d *decoder, c *Config, v *yaml.Node) {
		if n, ok := d.integer(v, key); ok {
			*p(c) = n
		}
	}}
}

func durField(key string, p func(*Config) *time.Duration) field {
	return field{key, func(d *decoder, c *Config, v *yaml.Node) {
		if t, ok := d.duration(v, key); ok {
			*p(c) = t
		}
	}}
}

func int64Field(key string, p func(*Config) *int64) field {
	return field{key, func(d *decoder, c *Config, v *yaml.Node) {
		if n, ok := d.integer(v, key); ok {
			*p(c) = int64(n)
		}
	}}
}

func boolField(key string, p func(*Config) *bool) field {
	return field{key, func(d *decoder, c *Config, v *yaml.Node) {
		if b, ok := d.boolean(v, key); ok {
			*p(c) = b
		}
	}}
}

// fields lists every top-level key relay understands, in the order
// examples/config.yml documents them. It is read-only.
var fields = []field{
	{"listen", func(d *decoder, c *Config, v *yaml.Node) {
		if s, ok := d.str(v, "listen"); ok {
			c.Listen, c.listenSet = s, true
		}
	}},
	intField("port", func(c *Config) *int { return &c.Port }),
	strField("tls_listen", func(c *Config) *string { return &c.TLSListen }),
	{"tls_certificates", decodeCertificates},
	{"tls_min_version", decodeTLSMinVersion},
	boolField("h2c", func(c *Config) *bool { return &c.H2C }),
	strField("algorithm", func(c *Config) *string { return &c.Algorithm }),
	{"backends", decodeBackends},
	{"discovery", decodeDiscovery},
	upstreamTLSField("tls_ca_file"),
	upstreamTLSField("tls_server_name"),
	upstreamTLSField("tls_client_cert_file"),
	upstreamTLSField("tls_client_key_file"),
	upstreamTLSField("tls_insecure_skip_verify"),
	strField("health_check_type", func(c *Config) *string { return &c.HealthCheck.Type }),
	strField("health_check_path", func(c *Config) *string { return &c.HealthCheck.Path }),
	durField("health_check_interval", func(c *Config) *time.Duration { return &c.HealthCheck.Interval }),
	durField("health_check_timeout", func(c *Config) *time.Duration { return &c.HealthCheck.Timeout }),
	intField("health_check_rise", func(c *Config) *int { return &c.HealthCheck.Rise }),
	intField("health_check_fall", func(c *Config) *int { return &c.HealthCheck.Fall }),
	boolField("health_check_reuse_connection", func(c *Config) *bool { return &c.HealthCheck.ReuseConnection }),
	{"trusted_proxies", decodeTrustedProxies},
	strField("log_file", func(c *Config) *string { return &c.LogFile }),
	intField("log_max_size_mb", func(c *Config) *int { return &c.LogMaxSizeMB }),
	intField("log_max_backups", func(c *Config) *int { return &c.LogMaxBackups }),
	intField("log_max_age_days", func(c *Config) *int { return &c.LogMaxAgeDays }),
	strField("log_level", func(c *Config) *string { return &c.LogLevel }),
	boolField("access_log", func(c *Config) *bool { return &c.AccessLog }),
	strField("access_log_file", func(c *Config) *string { return &c.AccessLogFile }),
	strField("access_log_format", func(c *Config) *string { return &c.AccessLogFormat }),
	boolField("request_id", func(c *Config) *bool { return &c.RequestID }),
	durField("connect_timeout", func(c *Config) *time.Duration { return &c.ConnectTimeout }),
	durField("response_timeout", func(c *Config) *time.Duration { return &c.ResponseTimeout }),
	durField("client_header_timeout", func(c *Config) *time.Duration { return &c.ClientHeaderTimeout }),
	durField("idle_timeout", func(c *Config) *time.Duration { return &c.IdleTimeout }),
	durField("client_body_timeout", func(c *Config) *time.Duration { return &c.ClientBodyTimeout }),
	intField("client_body_min_rate", func(c *Config) *int { return &c.ClientBodyMinRate }),
	int64Field("max_body_bytes", func(c *Config) *int64 { return &c.MaxBodyBytes }),
	int64Field("body_buffer_bytes", func(c *Config) *int64 { return &c.BodyBufferBytes }),
	durField("shutdown_timeout", func(c *Config) *time.Duration { return &c.ShutdownTimeout }),
	intField("max_idle_conns_per_backend", func(c *Config) *int { return &c.MaxIdleConnsPerBackend }),
	durField("upstream_idle_timeout", func(c *Config) *time.Duration { return &c.UpstreamIdleTimeout }),
	durField("tunnel_idle_timeout", func(c *Config) *time.Duration { return &c.TunnelIdleTimeout }),
	intField("max_connections", func(c *Config) *int { return &c.MaxConnections }),
	intField("retries", func(c *Config) *int { return &c.Retries }),
	intField("workers", func(c *Config) *int { return &c.Workers }),
	intField("processes", func(c *Config) *int { return &c.Processes }),
	boolField("cpu_affinity", func(c *Config) *bool { return &c.CPUAffinity }),
	intField("max_header_bytes", func(c *Config) *int { return &c.MaxHeaderBytes }),
	intField("breaker_failures", func(c *Config) *int { return &c.BreakerFailures }),
	{"breaker_statuses", decodeStatuses},
	durField("breaker_open_time", func(c *Config) *time.Duration { return &c.BreakerOpenTime }),
	intField("max_ejected_percent", func(c *Config) *int { return &c.MaxEjectedPercent }),
	intField("backend_max_requests", func(c *Config) *int { return &c.BackendMaxRequests }),
	intField("max_queued_requests", func(c *Config) *int { return &c.MaxQueuedRequests }),
	durField("queue_timeout", func(c *Config) *time.Duration { return &c.QueueTimeout }),
	intField("retry_budget_percent", func(c *Config) *int { return &c.RetryBudgetPercent }),
	intField("retry_budget_floor", func(c *Config) *int { return &c.RetryBudgetFloor }),
	durField("slow_start", func(c *Config) *time.Duration { return &c.SlowStart }),
	strField("admin_listen", func(c *Config) *string { return &c.AdminListen }),
	strField("admin_token", func(c *Config) *string { return &c.AdminToken }),
	{"admin_allowed_hosts", decodeAdminAllowedHosts},
}

// Keys lists every top-level YAML key relay understands.
func Keys() []string {
	keys := make([]string, len(fields))
	for i, f := range fields {
		keys[i] = f.key
	}
	return keys
}

// mapping walks the key/value pairs of m, reporting keys that are repeated,
// not plain names, or not in known, and calls visit for the rest. prefix is
// prepended to keys in problems ("backends[2]." inside a backend entry).
func (d *decoder) mapping(m *yaml.Node, prefix string, known []string, visit func(key string, k, v *yaml.Node)) {
	seen := make(map[string]int, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := resolve(m.Content[i]), resolve(m.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.problem(k.Line, strings.TrimSuffix(prefix, "."), "keys must be plain names, got %s", describe(k))
			continue
		}
		name := k.Value
		shown := name
		if len(shown) > 60 {
			shown = shown[:60] + "..."
		}
		if first, dup := seen[name]; dup {
			d.problem(k.Line, prefix+shown, "set twice (first at line %d)", first)
			continue
		}
		seen[name] = k.Line
		if !slices.Contains(known, name) {
			d.problem(k.Line, prefix+shown, "%s", unknownKey(name, prefix, k, known))
			continue
		}
		visit(name, k, v)
	}
}

func unknownKey(name, prefix string, k *yaml.Node, known []string) string {
	if k.ShortTag() == "!!merge" {
		return "merge keys (<<) are not supported; write the settings out"
	}
	if msg := misplacedKey(name, prefix); msg != "" {
		return msg
	}
	if s := suggest(name, known); s != "" {
		return fmt.Sprintf("unknown key; did you mean %q?", s)
	}
	return "unknown key"
}

// settings decodes the top-level mapping into c.
func (d *decoder) settings(root *yaml.Node, c *Config) {
	known := Keys()
	d.mapping(root, "", known, func(key string, k, v *yaml.Node) {
		c.lines[key] = k.Line
		if isNull(v) {
			return // "key:" with no value keeps the default
		}
		for _, f := range fields {
			if f.key == key {
				before := len(d.errs.Problems)
				f.set(d, c, v)
				if len(d.errs.Problems) > before {
					c.undecoded[key] = true
				}
				return
			}
		}
	})
}
