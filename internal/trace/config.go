package trace

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"
)

// Config is the tracing: section of relay's configuration. Tracing is on
// when an exporter endpoint is set; DefaultConfig gives the defaults that
// relay's config package starts the section from.
type Config struct {
	// Sample is the ratio of traces relay samples on its own account, 0 to 1.
	Sample float64 `yaml:"sample"`
	// HonourParent has a valid traceparent's sampled flag decide instead.
	HonourParent bool `yaml:"honour_parent"`
	// ServiceName is the service.name of relay's spans.
	ServiceName string `yaml:"service_name"`
	// ResourceAttributes are further attributes of the resource, such as
	// deployment.environment.name or service.instance.id.
	ResourceAttributes map[string]string `yaml:"resource_attributes"`
	// Exporter is where spans go and how.
	Exporter ExporterConfig `yaml:"exporter"`
}

// Defaults of the tracing section.
const (
	// DefaultSample samples every trace relay starts, as OpenTelemetry's
	// SDKs (parentbased_always_on) and Envoy do: whoever turns tracing on
	// sees traces at once. A busy site sets 0.01 or less; the queue bounds
	// what a high rate costs meanwhile, dropping what it cannot send.
	DefaultSample = 1.0
	// DefaultHonourParent follows the caller's decision, so that a trace is
	// whole or absent rather than missing relay's span or the backend's.
	DefaultHonourParent = true
	// DefaultServiceName is the service.name of relay's spans.
	DefaultServiceName = "relay"
	// DefaultProtocol is OTLP over gRPC, which a collector takes on 4317.
	DefaultProtocol = "grpc"
	// DefaultQueueSize is how many spans wait for export, about 1 MiB.
	DefaultQueueSize = 2048
	// DefaultBatchSize is the most spans one export request carries:
	// OpenTelemetry's batch processor's default, well under a collector's
	// 4 MiB request limit.
	DefaultBatchSize = 512
	// DefaultBatchTimeout is the longest a span waits for its batch to
	// fill. Shorter than the SDKs' 5 s, so that a trace shows up while
	// someone is looking for it; a batch a second costs a collector little.
	DefaultBatchTimeout = time.Second
	// DefaultExportTimeout bounds one export request.
	DefaultExportTimeout = 10 * time.Second
)

// Bounds of the exporter's settings.
const (
	MaxQueueSize     = 1 << 20
	MinBatchTimeout  = 10 * time.Millisecond
	MaxBatchTimeout  = time.Minute
	MinExportTimeout = 100 * time.Millisecond
	MaxExportTimeout = 5 * time.Minute
)

// DefaultConfig is the tracing section with every default and no endpoint:
// tracing off.
func DefaultConfig() Config {
	return Config{
		Sample:       DefaultSample,
		HonourParent: DefaultHonourParent,
		ServiceName:  DefaultServiceName,
		Exporter: ExporterConfig{
			Protocol:  DefaultProtocol,
			QueueSize: DefaultQueueSize,
			// BatchSize stays 0: DefaultBatchSize, or QueueSize when
			// that is smaller, so that a small queue_size alone is valid.
			BatchTimeout:  DefaultBatchTimeout,
			ExportTimeout: DefaultExportTimeout,
		},
	}
}

// Enabled reports whether the section turns tracing on: an endpoint is set.
func (c *Config) Enabled() bool { return c.Exporter.Endpoint != "" }

// Sampler is the section's sampler.
func (c *Config) Sampler() Sampler {
	return Sampler{Ratio: c.Sample, HonourParent: c.HonourParent}
}

// ExporterSettings is the exporter's configuration with the section's
// service name and resource attributes, for NewExporter.
func (c *Config) ExporterSettings() ExporterConfig {
	e := c.Exporter
	e.ServiceName, e.ResourceAttributes = c.ServiceName, c.ResourceAttributes
	return e
}

// Check returns every problem of the section, each naming its key
// ("tracing.sample: ..."). A section without an endpoint is tracing off and
// may hold only defaults' worth of settings: a sample or exporter setting
// without somewhere to send spans is a mistake worth saying.
func (c *Config) Check() []error {
	var errs []error
	if !validRatio(c.Sample) {
		errs = append(errs, fmt.Errorf("tracing.sample: must be from 0 to 1, got %v", c.Sample))
	}
	if c.ServiceName == "" {
		errs = append(errs, fmt.Errorf("tracing.service_name: must not be empty (the default is %q)", DefaultServiceName))
	}
	errs = append(errs, checkResource("tracing.resource_attributes", c.ResourceAttributes)...)
	if !c.Enabled() {
		if c.Exporter.Protocol != "" && c.Exporter.Protocol != DefaultProtocol || len(c.Exporter.Headers) > 0 ||
			c.Exporter.CAFile != "" || c.Exporter.ServerName != "" || c.Exporter.Insecure {
			errs = append(errs, fmt.Errorf("tracing.exporter.endpoint: is needed for the other exporter settings to mean anything; without it tracing is off"))
		}
		return errs
	}
	return append(errs, c.Exporter.checkExporter()...)
}

// ExporterConfig says where an Exporter sends spans and how it queues them.
// A zero QueueSize, BatchSize, BatchTimeout or ExportTimeout, or an empty
// Protocol or ServiceName, takes the default.
type ExporterConfig struct {
	// Protocol is "grpc" (OTLP/gRPC to Endpoint, HOST:PORT) or "http"
	// (OTLP/HTTP with protobuf bodies, POSTed to Endpoint + "/v1/traces").
	Protocol string `yaml:"protocol"`
	// Endpoint is HOST:PORT for grpc; an http:// or https:// URL for http,
	// whose scheme says whether TLS is used.
	Endpoint string `yaml:"endpoint"`
	// Headers go with every request (gRPC metadata, HTTP header fields),
	// such as a collector's API key.
	Headers map[string]string `yaml:"headers"`
	// Insecure sends gRPC in plain text; without it gRPC uses TLS. For
	// http the endpoint's scheme decides, and Insecure may not contradict
	// an https endpoint.
	Insecure bool `yaml:"insecure"`
	// CAFile is a PEM file of the CAs that verify the collector's
	// certificate; empty, the system's.
	CAFile string `yaml:"ca_file"`
	// ServerName is the name the collector's certificate is checked
	// against; empty, the endpoint's host.
	ServerName string `yaml:"server_name"`
	// QueueSize is the most spans held for export, including the batch
	// being sent; past it spans are dropped and counted.
	QueueSize int `yaml:"queue_size"`
	// BatchSize is the most spans in one export request; 0 takes
	// DefaultBatchSize, or QueueSize when that is smaller.
	BatchSize int `yaml:"batch_size"`
	// BatchTimeout is the longest a span waits for its batch to fill.
	BatchTimeout time.Duration `yaml:"batch_timeout"`
	// ExportTimeout bounds one export request.
	ExportTimeout time.Duration `yaml:"export_timeout"`

	// ServiceName and ResourceAttributes describe relay in every request;
	// in the file they are the tracing section's (Config.ExporterSettings).
	ServiceName        string            `yaml:"-"`
	ResourceAttributes map[string]string `yaml:"-"`
}

// Check returns every problem of the exporter's settings, each naming its
// key ("tracing.exporter.endpoint: ...").
func (c *ExporterConfig) Check() []error {
	errs := c.checkExporter()
	if c.Endpoint == "" {
		errs = append([]error{fmt.Errorf("tracing.exporter.endpoint: must be set")}, errs...)
	}
	return append(errs, checkResource("tracing.resource_attributes", c.ResourceAttributes)...)
}

func (c *ExporterConfig) checkExporter() []error {
	const at = "tracing.exporter."
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf(at+key+": "+format, args...))
	}
	tls := false
	switch c.Protocol {
	case "", "grpc":
		switch {
		case c.Endpoint == "":
		case strings.Contains(c.Endpoint, "://"):
			bad("endpoint", "must be HOST:PORT for protocol grpc, got %q (a URL is for protocol: http)", c.Endpoint)
		default:
			if _, port, err := net.SplitHostPort(c.Endpoint); err != nil || parsePort(port) == 0 {
				bad("endpoint", "must be HOST:PORT for protocol grpc, such as 127.0.0.1:4317, got %q", c.Endpoint)
			}
		}
		tls = !c.Insecure
	case "http":
		if c.Endpoint == "" {
			break
		}
		u, err := url.Parse(c.Endpoint)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			bad("endpoint", "must be an http:// or https:// URL for protocol http, such as http://127.0.0.1:4318, got %q", c.Endpoint)
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			bad("endpoint", "must be a URL without user, query or fragment, got %q", c.Endpoint)
		case u.Port() != "" && parsePort(u.Port()) == 0:
			bad("endpoint", "has no valid port: %q", c.Endpoint)
		default:
			tls = u.Scheme == "https"
			if tls && c.Insecure {
				bad("insecure", "contradicts the https endpoint %q; an http:// endpoint is plain text", c.Endpoint)
			}
		}
	default:
		bad("protocol", "must be grpc or http, got %q", c.Protocol)
	}
	if !tls && c.Endpoint != "" {
		if c.CAFile != "" {
			bad("ca_file", "applies to TLS only, and the exporter sends plain text")
		}
		if c.ServerName != "" {
			bad("server_name", "applies to TLS only, and the exporter sends plain text")
		}
	}
	for _, name := range sortedKeys(c.Headers) {
		if !validHeaderName(name) {
			bad("headers", "%q is not a header field name", name)
			continue
		}
		lower := strings.ToLower(name)
		grpc := c.Protocol != "http"
		switch {
		case grpc && !validMetadataKey(lower):
			bad("headers", "%q is not a gRPC metadata key (letters, digits, '-', '_', '.'; not grpc-..., not ...-bin)", name)
			continue
		case lower == "content-type" || lower == "content-length" || lower == "te" || lower == "host" ||
			lower == "user-agent" || lower == "connection" || lower == "transfer-encoding":
			bad("headers", "%s is set by the exporter itself", name)
			continue
		}
		if v := c.Headers[name]; !validHeaderValue(v) {
			bad("headers."+name, "must be printable: no control characters, no line breaks")
		}
	}
	check := func(key string, v, lo, hi int) {
		if v != 0 && (v < lo || v > hi) {
			bad(key, "must be from %d to %d, got %d", lo, hi, v)
		}
	}
	check("queue_size", c.QueueSize, 1, MaxQueueSize)
	check("batch_size", c.BatchSize, 1, MaxQueueSize)
	if c.BatchSize > 0 && c.queueSize() >= 1 && c.BatchSize > c.queueSize() {
		bad("batch_size", "%d is more than queue_size %d: a batch could never fill", c.BatchSize, c.queueSize())
	}
	dur := func(key string, v, lo, hi time.Duration) {
		if v != 0 && (v < lo || v > hi) {
			bad(key, "must be from %v to %v, got %v", lo, hi, v)
		}
	}
	dur("batch_timeout", c.BatchTimeout, MinBatchTimeout, MaxBatchTimeout)
	dur("export_timeout", c.ExportTimeout, MinExportTimeout, MaxExportTimeout)
	return errs
}

// checkResource judges resource attributes: service.name has a key of its
// own, and keys are not empty.
func checkResource(at string, attrs map[string]string) []error {
	var errs []error
	for _, k := range sortedKeys(attrs) {
		switch {
		case k == "":
			errs = append(errs, fmt.Errorf("%s: a key must not be empty", at))
		case k == "service.name":
			errs = append(errs, fmt.Errorf("%s.service.name: set tracing.service_name instead", at))
		}
	}
	return errs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// validHeaderName reports whether n is an RFC 9110 token. gRPC metadata
// keys are lower case on the wire; a name in any case is sent lowered.
// Header values are printable ASCII only, which both protocols carry
// unchanged.
func validHeaderName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// validMetadataKey reports whether k, lower case, may be a gRPC metadata
// key with a text value: gRPC keeps names starting "grpc-" for itself, and
// a "-bin" key would need its value in base64.
func validMetadataKey(k string) bool {
	if strings.HasPrefix(k, "grpc-") || strings.HasSuffix(k, "-bin") {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v may go as a field value in both
// protocols: gRPC's text metadata is printable ASCII and spaces, HTTP's
// has no control characters.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// withDefaults is c with every zero setting at its default.
func (c ExporterConfig) withDefaults() ExporterConfig {
	if c.Protocol == "" {
		c.Protocol = DefaultProtocol
	}
	c.QueueSize = c.queueSize()
	if c.BatchSize == 0 {
		c.BatchSize = min(DefaultBatchSize, c.QueueSize)
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	if c.ExportTimeout == 0 {
		c.ExportTimeout = DefaultExportTimeout
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	return c
}

func (c *ExporterConfig) queueSize() int {
	if c.QueueSize == 0 {
		return DefaultQueueSize
	}
	return c.QueueSize
}

// tracesURL is the OTLP/HTTP URL for traces: the endpoint with
// "/v1/traces" after its path, as OpenTelemetry's exporters read a base
// endpoint.
func (c *ExporterConfig) tracesURL() string {
	return strings.TrimRight(c.Endpoint, "/") + "/v1/traces"
}

// describe is the exporter's destination for log lines.
func (c *ExporterConfig) describe() string {
	return c.Protocol + " " + c.Endpoint
}
