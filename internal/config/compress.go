package config

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"relay/internal/compress"
)

// A compress section is decoded key by key into compress.Config, the
// component's own settings, and judged by its Check: the rules of the
// section live in package compress, once. Each problem is shown at the
// line of the key it is about.

// compressSettings are the keys of a compress section, each with how its
// value is read into the Config (a null value leaves the field zero,
// which is its default). A value of the wrong type is a problem at its
// own line.
var compressSettings = []struct {
	key string
	set func(d *decoder, c *compress.Config, v *yaml.Node, key string)
}{
	{"encodings", func(d *decoder, c *compress.Config, v *yaml.Node, key string) { c.Encodings = d.strs(v, key) }},
	{"gzip_level", func(d *decoder, c *compress.Config, v *yaml.Node, key string) { c.GzipLevel, _ = d.integer(v, key) }},
	{"brotli_level", func(d *decoder, c *compress.Config, v *yaml.Node, key string) { c.BrotliLevel, _ = d.integer(v, key) }},
	// Any scalar, so that Check names the levels there are when the file
	// gives a number (zstd_level: 3).
	{"zstd_level", func(d *decoder, c *compress.Config, v *yaml.Node, key string) {
		if v.Kind != yaml.ScalarNode {
			d.problem(v.Line, key, "must be one of fastest, default, better, best, got %s", describe(v))
			return
		}
		c.ZstdLevel = v.Value
	}},
	{"min_length", func(d *decoder, c *compress.Config, v *yaml.Node, key string) {
		n, _ := d.integer(v, key)
		c.MinLength = int64(n)
	}},
	{"types", func(d *decoder, c *compress.Config, v *yaml.Node, key string) { c.Types = d.strs(v, key) }},
	{"exclude_types", func(d *decoder, c *compress.Config, v *yaml.Node, key string) { c.ExcludeTypes = d.strs(v, key) }},
	{"with_cookies", func(d *decoder, c *compress.Config, v *yaml.Node, key string) { c.WithCookies, _ = d.boolean(v, key) }},
}

var compressKeys = func() []string {
	keys := make([]string, len(compressSettings))
	for i, s := range compressSettings {
		keys[i] = s.key
	}
	return keys
}()

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
	c := new(compress.Config)
	d.mapping(v, path+".", compressKeys, func(key string, _, val *yaml.Node) {
		if isNull(val) {
			return
		}
		for _, s := range compressSettings {
			if s.key == key {
				s.set(d, c, val, path+"."+key)
			}
		}
	})
	if len(d.errs.Problems) > before {
		return nil
	}
	for _, err := range c.Check() {
		key, msg, _ := strings.Cut(strings.TrimPrefix(err.Error(), "compress."), ": ")
		d.problem(settingLine(v, key), path+"."+key, "%s", msg)
	}
	if len(d.errs.Problems) > before {
		return nil
	}
	return c
}

// strs reads a list of strings, empty but not nil when the list is (an
// explicit empty list is not the default); a bad item is reported at its
// line.
func (d *decoder) strs(v *yaml.Node, key string) []string {
	items, ok := d.strList(v, key)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.value)
	}
	return out
}
