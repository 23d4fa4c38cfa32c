package config

import (
	"strings"
	"testing"
	"time"

	"relay/internal/trace"
)

// A tracing section with one mistake gets that one problem, under the
// key it is about, as relay -check prints it.
func TestTracingProblems(t *testing.T) {
	const b = "backends: [http://127.0.0.1:8001]"
	ep := "  exporter: {endpoint: 127.0.0.1:4317, insecure: true}"
	checkProblems(t, []problemCase{
		{"sample above 1", y(b, "tracing:", "  sample: 2", ep), 3, "tracing.sample", "must be from 0 to 1, got 2"},
		{"sample below 0", y(b, "tracing:", "  sample: -0.5", ep), 3, "tracing.sample", "must be from 0 to 1, got -0.5"},
		{"sample not a number", y(b, "tracing:", "  sample: often", ep), 3, "tracing", "cannot unmarshal"},
		{"unknown key", y(b, "tracing:", "  sampel: 0.5", ep), 3, "tracing.sampel", `unknown key; did you mean "sample"?`},
		{"unknown exporter key", y(b, "tracing:", "  exporter: {endpont: 127.0.0.1:4317}"), 3, "tracing.exporter.endpont", `unknown key; did you mean "endpoint"?`},
		{"grpc endpoint a URL", y(b, "tracing:", "  exporter:", "    endpoint: http://127.0.0.1:4317"), 4, "tracing.exporter.endpoint",
			`must be HOST:PORT for protocol grpc, got "http://127.0.0.1:4317" (a URL is for protocol: http)`},
		{"grpc endpoint without port", y(b, "tracing:", "  exporter:", "    endpoint: collector"), 4, "tracing.exporter.endpoint",
			`must be HOST:PORT for protocol grpc, such as 127.0.0.1:4317, got "collector"`},
		{"http endpoint not a URL", y(b, "tracing:", "  exporter:", "    protocol: http", "    endpoint: 127.0.0.1:4318"), 5, "tracing.exporter.endpoint",
			"must be an http:// or https:// URL for protocol http"},
		{"unknown protocol", y(b, "tracing:", "  exporter:", "    protocol: thrift", "    endpoint: 127.0.0.1:4317"), 4, "tracing.exporter.protocol",
			`must be grpc or http, got "thrift"`},
		{"queue size out of range", y(b, "tracing:", "  exporter:", "    endpoint: 127.0.0.1:4317", "    insecure: true", "    queue_size: -1"), 6,
			"tracing.exporter.queue_size", "must be from 1 to 1048576, got -1"},
		{"batch larger than queue", y(b, "tracing:", "  exporter:", "    endpoint: 127.0.0.1:4317", "    insecure: true", "    queue_size: 10", "    batch_size: 20"), 7,
			"tracing.exporter.batch_size", "20 is more than queue_size 10"},
		{"batch timeout too short", y(b, "tracing:", "  exporter:", "    endpoint: 127.0.0.1:4317", "    insecure: true", "    batch_timeout: 1ms"), 6,
			"tracing.exporter.batch_timeout", "must be from 10ms to 1m0s, got 1ms"},
		{"settings without endpoint", y(b, "tracing:", "  exporter: {protocol: http}"), 3, "tracing.exporter.endpoint",
			"is needed for the other exporter settings to mean anything"},
		{"empty service name", y(b, "tracing:", `  service_name: ""`, ep), 3, "tracing.service_name", "must not be empty"},
		{"not a mapping", y(b, "tracing: on"), 2, "tracing", "must be a mapping"},
	})
}

// A tracing section with an endpoint turns tracing on with the file's
// settings over the defaults; none, or one without an endpoint, is off.
func TestTracingSection(t *testing.T) {
	const b = "backends: [http://127.0.0.1:8001]\n"
	c := mustParse(t, b+y("tracing:", "  sample: 0.25", "  honour_parent: false", "  service_name: edge",
		"  exporter: {endpoint: 127.0.0.1:4317, insecure: true, batch_timeout: 200ms}"))
	if c.Tracing == nil {
		t.Fatal("tracing is off")
	}
	want := trace.DefaultConfig()
	want.Sample, want.HonourParent, want.ServiceName = 0.25, false, "edge"
	want.Exporter.Endpoint, want.Exporter.Insecure, want.Exporter.BatchTimeout = "127.0.0.1:4317", true, 200*time.Millisecond
	if got := *c.Tracing; got.Sample != want.Sample || got.HonourParent != want.HonourParent || got.ServiceName != want.ServiceName ||
		got.Exporter.Endpoint != want.Exporter.Endpoint || !got.Exporter.Insecure || got.Exporter.BatchTimeout != want.Exporter.BatchTimeout ||
		got.Exporter.QueueSize != trace.DefaultQueueSize || got.Exporter.Protocol != "grpc" {
		t.Errorf("tracing = %+v\nwant %+v", got, want)
	}
	// A queue smaller than the default batch takes batches of its size.
	if c := mustParse(t, b+"tracing: {exporter: {endpoint: 127.0.0.1:4317, insecure: true, queue_size: 100}}\n"); c.Tracing == nil ||
		c.Tracing.Exporter.QueueSize != 100 {
		t.Errorf("queue_size 100 alone: %+v", c.Tracing)
	}
	for _, off := range []string{b, b + "tracing:\n", b + "tracing: {sample: 0.5}\n"} {
		if c := mustParse(t, off); c.Tracing != nil {
			t.Errorf("%q turned tracing on: %+v", off, c.Tracing)
		}
	}
}

// relay -check prints each problem of the section with the key it is
// about.
func TestTracingProblemsTogether(t *testing.T) {
	_, err := Parse([]byte(y("backends: [http://127.0.0.1:8001]", "tracing:", "  sample: 2",
		"  exporter: {endpoint: http://collector:4317, queue_size: 0, batch_timeout: 2h}")), "relay.yml", testOpts)
	ps := problems(t, err)
	var keys []string
	for _, p := range ps {
		keys = append(keys, p.Key)
	}
	if got := strings.Join(keys, " "); got != "tracing.sample tracing.exporter.endpoint tracing.exporter.batch_timeout" {
		t.Errorf("problems under %q, want tracing.sample, tracing.exporter.endpoint, tracing.exporter.batch_timeout:\n%v", got, err)
	}
}
