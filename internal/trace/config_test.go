package trace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestConfigCheck(t *testing.T) {
	on := func(edit func(c *Config)) Config {
		c := DefaultConfig()
		c.Exporter.Endpoint = "127.0.0.1:4317"
		c.Exporter.Insecure = true
		if edit != nil {
			edit(&c)
		}
		return c
	}
	tests := []struct {
		name string
		cfg  Config
		want []string // each error's start, in order; none for a valid section
	}{
		{name: "defaults: tracing off", cfg: DefaultConfig()},
		{name: "grpc insecure", cfg: on(nil)},
		{name: "grpc TLS", cfg: on(func(c *Config) {
			c.Exporter.Insecure, c.Exporter.CAFile, c.Exporter.ServerName = false, "/etc/ca.pem", "collector"
		})},
		{name: "http plain", cfg: on(func(c *Config) {
			c.Exporter.Protocol, c.Exporter.Endpoint, c.Exporter.Insecure = "http", "http://127.0.0.1:4318", false
		})},
		{name: "http TLS with a path", cfg: on(func(c *Config) {
			c.Exporter.Protocol, c.Exporter.Endpoint, c.Exporter.Insecure = "http", "https://otel.example/otlp", false
		})},
		{name: "headers", cfg: on(func(c *Config) { c.Exporter.Headers = map[string]string{"X-Api-Key": "s3cret"} })},
		{name: "small queue without a batch size", cfg: on(func(c *Config) { c.Exporter.QueueSize = 100 })},
		{name: "bounds", cfg: on(func(c *Config) {
			c.Exporter.QueueSize, c.Exporter.BatchSize = 10, 10
			c.Exporter.BatchTimeout, c.Exporter.ExportTimeout = 10*time.Millisecond, 5*time.Minute
		})},

		{name: "sample above one", cfg: on(func(c *Config) { c.Sample = 1.5 }), want: []string{"tracing.sample: "}},
		{name: "sample negative", cfg: on(func(c *Config) { c.Sample = -0.1 }), want: []string{"tracing.sample: "}},
		{name: "empty service name", cfg: on(func(c *Config) { c.ServiceName = "" }), want: []string{"tracing.service_name: "}},
		{name: "service.name as a resource attribute", cfg: on(func(c *Config) {
			c.ResourceAttributes = map[string]string{"service.name": "x"}
		}), want: []string{"tracing.resource_attributes.service.name: "}},
		{name: "exporter settings without an endpoint", cfg: func() Config {
			c := DefaultConfig()
			c.Exporter.Headers = map[string]string{"a": "b"}
			return c
		}(), want: []string{"tracing.exporter.endpoint: "}},
		{name: "unknown protocol", cfg: on(func(c *Config) { c.Exporter.Protocol = "zipkin" }), want: []string{"tracing.exporter.protocol: "}},
		{name: "grpc endpoint as a URL", cfg: on(func(c *Config) { c.Exporter.Endpoint = "http://127.0.0.1:4317" }),
			want: []string{"tracing.exporter.endpoint: must be HOST:PORT"}},
		{name: "grpc endpoint without a port", cfg: on(func(c *Config) { c.Exporter.Endpoint = "collector" }),
			want: []string{"tracing.exporter.endpoint: "}},
		{name: "grpc endpoint with port 0", cfg: on(func(c *Config) { c.Exporter.Endpoint = "collector:0" }),
			want: []string{"tracing.exporter.endpoint: "}},
		{name: "http endpoint without a scheme", cfg: on(func(c *Config) {
			c.Exporter.Protocol, c.Exporter.Endpoint = "http", "127.0.0.1:4318"
		}), want: []string{"tracing.exporter.endpoint: must be an http:// or https:// URL"}},
		{name: "http endpoint with a query", cfg: on(func(c *Config) {
			c.Exporter.Protocol, c.Exporter.Endpoint = "http", "http://c:4318/?x=1"
		}), want: []string{"tracing.exporter.endpoint: "}},
		{name: "insecure against https", cfg: on(func(c *Config) {
			c.Exporter.Protocol, c.Exporter.Endpoint = "http", "https://c:4318"
		}), want: []string{"tracing.exporter.insecure: "}},
		{name: "TLS settings on plain text", cfg: on(func(c *Config) { c.Exporter.CAFile, c.Exporter.ServerName = "ca.pem", "c" }),
			want: []string{"tracing.exporter.ca_file: ", "tracing.exporter.server_name: "}},
		{name: "bad header name", cfg: on(func(c *Config) { c.Exporter.Headers = map[string]string{"bad name": "v"} }),
			want: []string{"tracing.exporter.headers: \"bad name\""}},
		{name: "header value with a line break", cfg: on(func(c *Config) { c.Exporter.Headers = map[string]string{"k": "a\r\nb: c"} }),
			want: []string{"tracing.exporter.headers.k: "}},
		{name: "header value not ASCII", cfg: on(func(c *Config) { c.Exporter.Headers = map[string]string{"k": "café"} }),
			want: []string{"tracing.exporter.headers.k: "}},
		{name: "header no gRPC metadata key", cfg: on(func(c *Config) { c.Exporter.Headers = map[string]string{"x!y": "v"} }),
			want: []string{"tracing.exporter.headers: \"x!y\" is not a gRPC metadata key"}},
		{name: "gRPC reserved key", cfg: on(func(c *Config) { c.Exporter.Headers = map[string]string{"grpc-timeout": "1S"} }),
			want: []string{"tracing.exporter.headers: "}},
		{name: "binary key", cfg: on(func(c *Config) { c.Exporter.Headers = map[string]string{"token-bin": "x"} }),
			want: []string{"tracing.exporter.headers: "}},
		{name: "HTTP token that is no gRPC key", cfg: on(func(c *Config) {
			c.Exporter.Protocol, c.Exporter.Endpoint, c.Exporter.Insecure = "http", "http://c:4318", false
			c.Exporter.Headers = map[string]string{"x!y": "v"}
		})},
		{name: "header the exporter sets", cfg: on(func(c *Config) { c.Exporter.Headers = map[string]string{"Content-Type": "text/plain"} }),
			want: []string{"tracing.exporter.headers: Content-Type"}},
		{name: "queue too large", cfg: on(func(c *Config) { c.Exporter.QueueSize = MaxQueueSize + 1 }),
			want: []string{"tracing.exporter.queue_size: "}},
		{name: "negative batch", cfg: on(func(c *Config) { c.Exporter.BatchSize = -1 }),
			want: []string{"tracing.exporter.batch_size: "}},
		{name: "batch over queue", cfg: on(func(c *Config) { c.Exporter.QueueSize, c.Exporter.BatchSize = 10, 11 }),
			want: []string{"tracing.exporter.batch_size: 11 is more than queue_size 10"}},
		{name: "timeouts out of range", cfg: on(func(c *Config) {
			c.Exporter.BatchTimeout, c.Exporter.ExportTimeout = time.Millisecond, time.Hour
		}), want: []string{"tracing.exporter.batch_timeout: ", "tracing.exporter.export_timeout: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.cfg.Check()
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors %v, want %d: %q", len(errs), errs, len(tt.want), tt.want)
			}
			for i, err := range errs {
				if !strings.HasPrefix(err.Error(), tt.want[i]) {
					t.Errorf("error %d: %q, want it to start with %q", i, err, tt.want[i])
				}
				if m := err.Error(); m[len(tt.want[i]):] == "" {
					t.Errorf("error %d says nothing past its key: %q", i, m)
				}
			}
		})
	}
}

func TestExporterConfigCheck(t *testing.T) {
	tests := []struct {
		name string
		cfg  ExporterConfig
		want string
	}{
		{name: "valid", cfg: ExporterConfig{Endpoint: "127.0.0.1:4317", Insecure: true}},
		{name: "no endpoint", cfg: ExporterConfig{}, want: "tracing.exporter.endpoint: must be set"},
		{name: "resource service.name", cfg: ExporterConfig{Endpoint: "c:1", ResourceAttributes: map[string]string{"service.name": "x"}},
			want: "tracing.resource_attributes.service.name: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.cfg.Check()
			switch {
			case tt.want == "" && len(errs) > 0:
				t.Fatalf("unexpected errors %v", errs)
			case tt.want != "" && (len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), tt.want)):
				t.Fatalf("got %v, want one starting %q", errs, tt.want)
			}
		})
	}
}

// TestConfigYAML reads a tracing section with the yaml tags, over the
// defaults, as relay's config package does.
func TestConfigYAML(t *testing.T) {
	src := `
sample: 0.05
honour_parent: false
service_name: edge
resource_attributes: {deployment.environment.name: prod}
exporter:
  protocol: http
  endpoint: https://collector.example:4318
  headers: {x-api-key: k}
  ca_file: /etc/relay/ca.pem
  server_name: collector
  queue_size: 4096
  batch_size: 256
  batch_timeout: 500ms
  export_timeout: 3s
`
	c := DefaultConfig()
	if err := yaml.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	if errs := c.Check(); len(errs) > 0 {
		t.Fatal(errs)
	}
	e := c.ExporterSettings()
	if c.Sample != 0.05 || c.HonourParent || e.ServiceName != "edge" || e.ResourceAttributes["deployment.environment.name"] != "prod" ||
		e.Protocol != "http" || e.Endpoint != "https://collector.example:4318" || e.Headers["x-api-key"] != "k" ||
		e.CAFile != "/etc/relay/ca.pem" || e.ServerName != "collector" || e.QueueSize != 4096 || e.BatchSize != 256 ||
		e.BatchTimeout != 500*time.Millisecond || e.ExportTimeout != 3*time.Second {
		t.Fatalf("read %+v", c)
	}
	if got := c.Sampler(); got != (Sampler{Ratio: 0.05}) {
		t.Fatalf("Sampler() = %+v", got)
	}

	d := DefaultConfig()
	if err := yaml.Unmarshal([]byte("exporter: {endpoint: '127.0.0.1:4317', insecure: true}"), &d); err != nil {
		t.Fatal(err)
	}
	if !d.Enabled() || d.Sample != DefaultSample || !d.HonourParent || d.Exporter.Protocol != "grpc" ||
		d.Exporter.QueueSize != DefaultQueueSize || d.Exporter.BatchTimeout != DefaultBatchTimeout {
		t.Fatalf("defaults not kept: %+v", d)
	}
}

// TestNewExporterErrors: NewExporter refuses what Check refuses, and a CA
// file it cannot use, naming the key.
func TestNewExporterErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  ExporterConfig
		want string
	}{
		{name: "invalid", cfg: ExporterConfig{Endpoint: "nowhere"}, want: "tracing.exporter.endpoint: "},
		{name: "missing CA file", cfg: ExporterConfig{Endpoint: "127.0.0.1:4317", CAFile: filepath.Join(dir, "none.pem")},
			want: "tracing.exporter.ca_file: "},
		{name: "CA file without PEM", cfg: ExporterConfig{Endpoint: "127.0.0.1:4317", CAFile: notPEM},
			want: "tracing.exporter.ca_file: " + notPEM + " holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewExporter(tt.cfg, nil)
			if err == nil {
				e.Close(t.Context())
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error %q, want it to start with %q", err, tt.want)
			}
		})
	}
}

// A batch is DefaultBatchSize spans unless the queue is smaller, when it
// is the queue: a queue_size below 512 needs no batch_size beside it.
func TestBatchSizeDefault(t *testing.T) {
	for _, tt := range []struct{ queue, batch, want int }{{0, 0, DefaultBatchSize}, {100, 0, 100}, {4096, 0, DefaultBatchSize}, {100, 10, 10}} {
		c := DefaultConfig()
		c.Exporter.Endpoint, c.Exporter.Insecure = "127.0.0.1:4317", true
		if tt.queue != 0 {
			c.Exporter.QueueSize = tt.queue
		}
		c.Exporter.BatchSize = tt.batch
		if errs := c.Check(); len(errs) > 0 {
			t.Errorf("queue %d batch %d: %v", tt.queue, tt.batch, errs)
		}
		if got := c.ExporterSettings().withDefaults().BatchSize; got != tt.want {
			t.Errorf("queue %d batch %d: batches of %d, want %d", tt.queue, tt.batch, got, tt.want)
		}
	}
}
