package compress

import (
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		config Config
		want   []string
	}{
		{name: "empty section", config: Config{}},
		{name: "defaults written out", config: DefaultConfig()},
		{name: "every setting valid", config: Config{
			Encodings: []string{"gzip", "BR"}, GzipLevel: 9, BrotliLevel: 11, ZstdLevel: "best",
			MinLength: 1, Types: []string{"*/*"}, ExcludeTypes: []string{"image/*", "*/*+zip", "application/*+gzip"},
			WithCookies: true,
		}},
		{name: "unknown encoding", config: Config{Encodings: []string{"gzip", "lz4"}},
			want: []string{`compress.encodings: unknown encoding "lz4" (relay produces zstd, br and gzip)`}},
		{name: "identity listed", config: Config{Encodings: []string{"identity", "gzip"}},
			want: []string{`compress.encodings: "identity" is not a compression; leave it out (relay sends the body as it is whenever a client accepts none of the others)`}},
		{name: "duplicate encoding", config: Config{Encodings: []string{"gzip", "br", "x-gzip"}},
			want: []string{`compress.encodings: "x-gzip" is listed twice (as gzip)`}},
		{name: "empty encodings", config: Config{Encodings: []string{}},
			want: []string{`compress.encodings: is empty; leave the key out for the default zstd, br, gzip`}},
		{name: "gzip level too high", config: Config{GzipLevel: 10},
			want: []string{`compress.gzip_level: 10 is out of range: 1 (fastest) to 9 (densest), default 5`}},
		{name: "gzip level negative", config: Config{GzipLevel: -1},
			want: []string{`compress.gzip_level: -1 is out of range: 1 (fastest) to 9 (densest), default 5`}},
		{name: "brotli level too high", config: Config{BrotliLevel: 12},
			want: []string{`compress.brotli_level: 12 is out of range: 1 (fastest) to 11 (densest), default 4`}},
		{name: "zstd level unknown", config: Config{ZstdLevel: "fast"},
			want: []string{`compress.zstd_level: "fast" is not one of fastest, default, better, best`}},
		{name: "zstd level by number", config: Config{ZstdLevel: "3"},
			want: []string{`compress.zstd_level: "3" is not one of fastest, default, better, best`}},
		{name: "negative min length", config: Config{MinLength: -5},
			want: []string{`compress.min_length: -5 is negative; give a length in bytes, 0 for the default 1024`}},
		{name: "empty types", config: Config{Types: []string{}},
			want: []string{`compress.types: is empty, which would compress nothing; leave the key out for the default list`}},
		{name: "type without subtype", config: Config{Types: []string{"text"}},
			want: []string{`compress.types: "text" is not a media type pattern: TYPE/SUBTYPE, TYPE/*, TYPE/*+SUFFIX, */*+SUFFIX or */*`}},
		{name: "type with parameters", config: Config{Types: []string{"text/html; charset=utf-8"}},
			want: []string{`compress.types: "text/html; charset=utf-8" has parameters; types are matched without them, so give the media type alone`}},
		{name: "partial wildcard", config: Config{Types: []string{"text/ht*"}},
			want: []string{`compress.types: "text/ht*" has a '*' that stands for part of a name; it stands only for a whole type or subtype, or before +SUFFIX`}},
		{name: "wildcard type, named subtype", config: Config{Types: []string{"*/json"}},
			want: []string{`compress.types: "*/json" has a wildcard type with a named subtype; use */* or */*+SUFFIX`}},
		{name: "empty suffix", config: Config{Types: []string{"application/*+"}},
			want: []string{`compress.types: "application/*+" is not a media type pattern: TYPE/SUBTYPE, TYPE/*, TYPE/*+SUFFIX, */*+SUFFIX or */*`}},
		{name: "space in type", config: Config{Types: []string{" text/html"}},
			want: []string{`compress.types: " text/html" is not a media type pattern: TYPE/SUBTYPE, TYPE/*, TYPE/*+SUFFIX, */*+SUFFIX or */*`}},
		{name: "duplicate type in another case", config: Config{Types: []string{"text/html", "Text/HTML"}},
			want: []string{`compress.types: "Text/HTML" is listed twice`}},
		{name: "bad excluded type", config: Config{ExcludeTypes: []string{"image/*", "image/*", "png"}},
			want: []string{
				`compress.exclude_types: "image/*" is listed twice`,
				`compress.exclude_types: "png" is not a media type pattern: TYPE/SUBTYPE, TYPE/*, TYPE/*+SUFFIX, */*+SUFFIX or */*`,
			}},
		{name: "every problem at once", config: Config{
			Encodings: []string{"deflate"}, GzipLevel: 11, BrotliLevel: -2, ZstdLevel: "max",
			MinLength: -1, Types: []string{"text/**"},
		}, want: []string{
			`compress.encodings: unknown encoding "deflate" (relay produces zstd, br and gzip)`,
			`compress.gzip_level: 11 is out of range: 1 (fastest) to 9 (densest), default 5`,
			`compress.brotli_level: -2 is out of range: 1 (fastest) to 11 (densest), default 4`,
			`compress.zstd_level: "max" is not one of fastest, default, better, best`,
			`compress.min_length: -1 is negative; give a length in bytes, 0 for the default 1024`,
			`compress.types: "text/**" has a '*' that stands for part of a name; it stands only for a whole type or subtype, or before +SUFFIX`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.config.Check()
			var got []string
			for _, err := range errs {
				got = append(got, err.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Check() =\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
			p, err := New(tt.config)
			if (err == nil) != (tt.want == nil) {
				t.Fatalf("New: %v, want an error: %v", err, tt.want != nil)
			}
			if err != nil {
				// New reports what Check does, every problem.
				if err.Error() != strings.Join(tt.want, "\n") {
					t.Errorf("New: %q, want %q", err, strings.Join(tt.want, "\n"))
				}
				if p != nil {
					t.Error("New returned a policy with its error")
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c := DefaultConfig()
	want := Config{
		Encodings: []string{"zstd", "br", "gzip"}, GzipLevel: 5, BrotliLevel: 4, ZstdLevel: "fastest",
		MinLength: 1024, Types: DefaultTypes,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("DefaultConfig() = %+v, want %+v", c, want)
	}
	p := mustNew(t, Config{})
	if !reflect.DeepEqual(p.Config(), want) {
		t.Errorf("New(Config{}).Config() = %+v, want the defaults", p.Config())
	}
	if got := p.Encodings(); !reflect.DeepEqual(got, []Encoding{Zstd, Brotli, Gzip}) {
		t.Errorf("Encodings() = %v", got)
	}
	// A field given keeps its value; the others take their defaults.
	c = Config{GzipLevel: 1, Encodings: []string{"gzip"}}.WithDefaults()
	if c.GzipLevel != 1 || !reflect.DeepEqual(c.Encodings, []string{"gzip"}) || c.BrotliLevel != DefaultBrotliLevel || c.MinLength != DefaultMinLength {
		t.Errorf("WithDefaults() = %+v", c)
	}
}

func TestConfigYAML(t *testing.T) {
	const doc = `
encodings: [br, gzip]
gzip_level: 6
brotli_level: 3
zstd_level: better
min_length: 512
types: [text/html, "application/*+json"]
exclude_types: [text/csv]
with_cookies: true
`
	var c Config
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Encodings: []string{"br", "gzip"}, GzipLevel: 6, BrotliLevel: 3, ZstdLevel: "better", MinLength: 512,
		Types: []string{"text/html", "application/*+json"}, ExcludeTypes: []string{"text/csv"}, WithCookies: true,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("decoded %+v, want %+v", c, want)
	}
	if errs := c.Check(); errs != nil {
		t.Errorf("Check: %v", errs)
	}
}
