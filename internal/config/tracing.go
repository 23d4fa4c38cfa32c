package config

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"relay/internal/trace"
)

// The tracing section is decoded straight into trace.Config, the
// component's own settings, and judged by its Check: the rules live in
// package trace, once.

var (
	tracingKeys  = []string{"sample", "honour_parent", "service_name", "resource_attributes", "exporter"}
	exporterKeys = []string{"protocol", "endpoint", "headers", "insecure", "ca_file", "server_name", "queue_size", "batch_size", "batch_timeout", "export_timeout"}
)

// decodeTracing reads the tracing section: the defaults (trace.DefaultConfig)
// with what the file sets.
func decodeTracing(d *decoder, c *Config, v *yaml.Node) {
	const at = "tracing"
	if isNull(v) {
		return
	}
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, at, "must be a mapping such as {sample: 0.01, exporter: {endpoint: 127.0.0.1:4317, insecure: true}}, got %s", describe(v))
		return
	}
	before := len(d.errs.Problems)
	d.mapping(v, at+".", tracingKeys, func(key string, _, val *yaml.Node) {
		if key == "exporter" && val.Kind == yaml.MappingNode {
			d.mapping(val, at+".exporter.", exporterKeys, func(string, *yaml.Node, *yaml.Node) {})
		}
	})
	if len(d.errs.Problems) > before {
		return
	}
	t := trace.DefaultConfig()
	if err := v.Decode(&t); err != nil {
		d.problem(v.Line, at, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		return
	}
	for _, err := range t.Check() {
		key, msg, _ := strings.Cut(err.Error(), ": ")
		d.problem(settingLine(v, strings.TrimPrefix(key, at+".")), key, "%s", msg)
	}
	if len(d.errs.Problems) == before && t.Enabled() {
		c.Tracing = &t
	}
}
