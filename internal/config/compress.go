package config

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"relay/internal/compress"
)

// A compress section is decoded straight into compress.Config, the
// component's own settings, and judged by its Check: the rules of the
// section live in package compress, once.

var compressKeys = []string{"encodings", "gzip_level", "brotli_level", "zstd_level", "min_length", "types", "exclude_types", "with_cookies"}

// poolCompress reads a pool's compress section, the top level's or a
// named pool's.
func poolCompress(d *decoder, p *Pool, v *yaml.Node, path string) {
	p.Compress = d.compress(v, path)
}

// compress reads and judges one compress section at path; nil when it is
// unusable (the problems are reported) or null. `compress: true` takes
// every default.
func (d *decoder) compress(v *yaml.Node, path string) *compress.Config {
	if isNull(v) {
		return nil
	}
	if v.Kind == yaml.ScalarNode && v.Tag == "!!bool" {
		if v.Value == "true" {
			return &compress.Config{}
		}
		return nil
	}
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, path, "must be true or a mapping such as {encodings: [zstd, br, gzip], min_length: 1024}, got %s", describe(v))
		return nil
	}
	before := len(d.errs.Problems)
	d.mapping(v, path+".", compressKeys, func(string, *yaml.Node, *yaml.Node) {})
	if len(d.errs.Problems) > before {
		return nil
	}
	c := new(compress.Config)
	if err := v.Decode(c); err != nil {
		d.problem(v.Line, path, "%s", strings.TrimPrefix(err.Error(), "yaml: "))
		return nil
	}
	for _, err := range c.Check() {
		key, msg, _ := strings.Cut(strings.TrimPrefix(err.Error(), "compress."), ": ")
		d.problem(v.Line, path+"."+key, "%s", msg)
	}
	if len(d.errs.Problems) > before {
		return nil
	}
	return c
}
