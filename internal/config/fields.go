package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// field is one top-level YAML key and how its value lands in a Config.
// A pool key sets a Pool instead (pool is set, set is not): the top
// level's, or a named pool's, where path names the key in problems
// ("pools.api.retries").
type field struct {
	key  string
	set  func(d *decoder, c *Config, v *yaml.Node)
	pool func(d *decoder, p *Pool, v *yaml.Node, path string)
}

func poolStr(key string, ptr func(*Pool) *string) field {
	return field{key: key, pool: func(d *decoder, p *Pool, v *yaml.Node, path string) {
		if s, ok := d.str(v, path); ok {
			*ptr(p) = s
		}
	}}
}

func poolInt(key string, ptr func(*Pool) *int) field {
	return field{key: key, pool: func(d *decoder, p *Pool, v *yaml.Node, path string) {
		if n, ok := d.integer(v, path); ok {
			*ptr(p) = n
		}
	}}
}

func poolDur(key string, ptr func(*Pool) *time.Duration) field {
	return field{key: key, pool: func(d *decoder, p *Pool, v *yaml.Node, path string) {
		if t, ok := d.duration(v, path); ok {
			*ptr(p) = t
		}
	}}
}

func poolBool(key string, ptr func(*Pool) *bool) field {
	return field{key: key, pool: func(d *decoder, p *Pool, v *yaml.Node, path string) {
		if b, ok := d.boolean(v, path); ok {
			*ptr(p) = b
		}
	}}
}

func strField(key string, p func(*Config) *string) field {
	return field{key: key, set: func(d *decoder, c *Config, v *yaml.Node) {
		if s, ok := d.str(v, key); ok {
			*p(c) = s
		}
	}}
}

func intField(key string, p func(*Config) *int) field {
	return field{key: key, set: func(d *decoder, c *Config, v *yaml.Node) {
		if n, ok := d.integer(v, key); ok {
			*p(c) = n
		}
	}}
}

func durField(key string, p func(*Config) *time.Duration) field {
	return field{key: key, set: func(d *decoder, c *Config, v *yaml.Node) {
		if t, ok := d.duration(v, key); ok {
			*p(c) = t
		}
	}}
}

func int64Field(key string, p func(*Config) *int64) field {
	return field{key: key, set: func(d *decoder, c *Config, v *yaml.Node) {
		if n, ok := d.integer(v, key); ok {
			*p(c) = int64(n)
		}
	}}
}

func boolField(key string, p func(*Config) *bool) field {
	return field{key: key, set: func(d *decoder, c *Config, v *yaml.Node) {
		if b, ok := d.boolean(v, key); ok {
			*p(c) = b
		}
	}}
}

// fields lists every top-level key relay understands, in the order
// examples/config.yml documents them. It is read-only.
var fields = []field{
	{key: "listen", set: func(d *decoder, c *Config, v *yaml.Node) {
		if s, ok := d.str(v, "listen"); ok {
			c.Listen, c.listenSet = s, true
		}
	}},
	intField("port", func(c *Config) *int { return &c.Port }),
	strField("tls_listen", func(c *Config) *string { return &c.TLSListen }),
	{key: "tls_certificates", set: decodeCertificates},
	{key: "tls_min_version", set: decodeTLSMinVersion},
	{key: "client_auth", set: decodeClientAuth},
	strField("client_cert_headers", func(c *Config) *string { return &c.ClientCertHeaders }),
	boolField("client_cert_pem", func(c *Config) *bool { return &c.ClientCertPEM }),
	boolField("h2c", func(c *Config) *bool { return &c.H2C }),
	poolStr("algorithm", func(p *Pool) *string { return &p.Algorithm }),
	{key: "backends", pool: decodeBackends},
	{key: "discovery", set: decodeDiscovery},
	{key: "pools", set: decodePools},
	{key: "routes", set: decodeRoutes},
	strField("escaped_slashes", func(c *Config) *string { return &c.EscapedSlashes }),
	upstreamTLSField("tls_ca_file"),
	upstreamTLSField("tls_server_name"),
	upstreamTLSField("tls_client_cert_file"),
	upstreamTLSField("tls_client_key_file"),
	upstreamTLSField("tls_insecure_skip_verify"),
	poolStr("protocol", func(p *Pool) *string { return &p.Protocol }),
	poolStr("health_check_type", func(p *Pool) *string { return &p.HealthCheck.Type }),
	poolStr("health_check_path", func(p *Pool) *string { return &p.HealthCheck.Path }),
	poolStr("health_check_grpc_service", func(p *Pool) *string { return &p.HealthCheck.GRPCService }),
	poolDur("health_check_interval", func(p *Pool) *time.Duration { return &p.HealthCheck.Interval }),
	poolDur("health_check_timeout", func(p *Pool) *time.Duration { return &p.HealthCheck.Timeout }),
	poolInt("health_check_rise", func(p *Pool) *int { return &p.HealthCheck.Rise }),
	poolInt("health_check_fall", func(p *Pool) *int { return &p.HealthCheck.Fall }),
	poolBool("health_check_reuse_connection", func(p *Pool) *bool { return &p.HealthCheck.ReuseConnection }),
	{key: "trusted_proxies", set: decodeTrustedProxies},
	strField("log_file", func(c *Config) *string { return &c.LogFile }),
	intField("log_max_size_mb", func(c *Config) *int { return &c.LogMaxSizeMB }),
	intField("log_max_backups", func(c *Config) *int { return &c.LogMaxBackups }),
	intField("log_max_age_days", func(c *Config) *int { return &c.LogMaxAgeDays }),
	strField("log_level", func(c *Config) *string { return &c.LogLevel }),
	boolField("access_log", func(c *Config) *bool { return &c.AccessLog }),
	strField("access_log_file", func(c *Config) *string { return &c.AccessLogFile }),
	strField("access_log_format", func(c *Config) *string { return &c.AccessLogFormat }),
	boolField("request_id", func(c *Config) *bool { return &c.RequestID }),
	poolDur("connect_timeout", func(p *Pool) *time.Duration { return &p.ConnectTimeout }),
	poolDur("response_timeout", func(p *Pool) *time.Duration { return &p.ResponseTimeout }),
	poolDur("max_grpc_timeout", func(p *Pool) *time.Duration { return &p.MaxGRPCTimeout }),
	durField("client_header_timeout", func(c *Config) *time.Duration { return &c.ClientHeaderTimeout }),
	durField("idle_timeout", func(c *Config) *time.Duration { return &c.IdleTimeout }),
	durField("client_body_timeout", func(c *Config) *time.Duration { return &c.ClientBodyTimeout }),
	intField("client_body_min_rate", func(c *Config) *int { return &c.ClientBodyMinRate }),
	int64Field("max_body_bytes", func(c *Config) *int64 { return &c.MaxBodyBytes }),
	intField("compress_memory_mb", func(c *Config) *int { return &c.CompressMemoryMB }),
	int64Field("body_buffer_bytes", func(c *Config) *int64 { return &c.BodyBufferBytes }),
	durField("shutdown_timeout", func(c *Config) *time.Duration { return &c.ShutdownTimeout }),
	poolInt("max_idle_conns_per_backend", func(p *Pool) *int { return &p.MaxIdleConnsPerBackend }),
	poolDur("upstream_idle_timeout", func(p *Pool) *time.Duration { return &p.UpstreamIdleTimeout }),
	durField("tunnel_idle_timeout", func(c *Config) *time.Duration { return &c.TunnelIdleTimeout }),
	intField("max_connections", func(c *Config) *int { return &c.MaxConnections }),
	poolInt("retries", func(p *Pool) *int { return &p.Retries }),
	intField("workers", func(c *Config) *int { return &c.Workers }),
	intField("processes", func(c *Config) *int { return &c.Processes }),
	boolField("cpu_affinity", func(c *Config) *bool { return &c.CPUAffinity }),
	intField("max_header_bytes", func(c *Config) *int { return &c.MaxHeaderBytes }),
	poolInt("breaker_failures", func(p *Pool) *int { return &p.BreakerFailures }),
	{key: "breaker_statuses", pool: decodeStatuses},
	{key: "breaker_grpc_statuses", pool: decodeGRPCStatuses},
	poolDur("breaker_open_time", func(p *Pool) *time.Duration { return &p.BreakerOpenTime }),
	poolInt("max_ejected_percent", func(p *Pool) *int { return &p.MaxEjectedPercent }),
	poolInt("backend_max_requests", func(p *Pool) *int { return &p.BackendMaxRequests }),
	poolInt("max_queued_requests", func(p *Pool) *int { return &p.MaxQueuedRequests }),
	poolDur("queue_timeout", func(p *Pool) *time.Duration { return &p.QueueTimeout }),
	poolInt("retry_budget_percent", func(p *Pool) *int { return &p.RetryBudgetPercent }),
	poolInt("retry_budget_floor", func(p *Pool) *int { return &p.RetryBudgetFloor }),
	poolDur("slow_start", func(p *Pool) *time.Duration { return &p.SlowStart }),
	{key: "sticky", pool: decodeSticky},
	{key: "rate_limit", pool: poolRateLimit},
	{key: "compress", pool: poolCompress},
	poolStr("hash_key", func(p *Pool) *string { return &p.HashKey }),
	poolInt("hash_balance_factor", func(p *Pool) *int { return &p.HashBalanceFactor }),
	{key: "redis", set: decodeRedis},
	{key: "acme", set: decodeACME},
	{key: "tracing", set: decodeTracing},
	strField("admin_listen", func(c *Config) *string { return &c.AdminListen }),
	strField("admin_token", func(c *Config) *string { return &c.AdminToken }),
	{key: "admin_allowed_hosts", set: decodeAdminAllowedHosts},
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
				if f.pool != nil {
					f.pool(d, &c.Pool, v, key)
				} else {
					f.set(d, c, v)
				}
				if len(d.errs.Problems) > before {
					c.undecoded[key] = true
				}
				return
			}
		}
	})
}
