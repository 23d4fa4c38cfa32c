package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"relay/internal/compress"
)

// A compress section with one mistake gets that one problem, under the
// key it is about and at that key's line (a list item's own line when
// the item is of the wrong type), at the top level, in a pool and in a
// route.
func TestCompressProblems(t *testing.T) {
	const b = "backends: [http://127.0.0.1:8001]"
	top := func(lines ...string) string {
		return y(append([]string{b, "compress:", "  min_length: 512"}, lines...)...)
	}
	checkProblems(t, []problemCase{
		// Values compress.Check rejects.
		{"unknown encoding", top("  encodings: [zstd, lz4]"), 4, "compress.encodings", `unknown encoding "lz4" (relay produces zstd, br and gzip)`},
		{"unknown encoding in a block list", top("  encodings:", "    - gzip", "    - lz4"), 4, "compress.encodings", `unknown encoding "lz4"`},
		{"identity as an encoding", top("  encodings: [gzip, identity]"), 4, "compress.encodings", `"identity" is not a compression`},
		{"encoding twice", top("  encodings: [gzip, br, GZIP]"), 4, "compress.encodings", `"GZIP" is listed twice`},
		{"no encodings", top("  encodings: []"), 4, "compress.encodings", "is empty; leave the key out"},
		{"gzip level too high", top("  gzip_level: 12"), 4, "compress.gzip_level", "12 is out of range: 1 (fastest) to 9 (densest), default 5"},
		{"gzip level negative", top("  gzip_level: -1"), 4, "compress.gzip_level", "-1 is out of range"},
		{"brotli level too high", top("  brotli_level: 12"), 4, "compress.brotli_level", "12 is out of range: 1 (fastest) to 11 (densest), default 4"},
		{"unknown zstd level", top("  zstd_level: fast"), 4, "compress.zstd_level", `"fast" is not one of fastest, default, better, best`},
		{"zstd level a number", top("  zstd_level: 3"), 4, "compress.zstd_level", `"3" is not one of fastest, default, better, best`},
		{"negative min_length", y(b, "compress:", "  encodings: [gzip]", "  min_length: -1"), 4, "compress.min_length",
			"-1 is negative; give a length in bytes, 0 for the default 1024"},
		{"bad content type", top("  types: [text/html, texthtml]"), 4, "compress.types", `"texthtml" is not a media type pattern`},
		{"bad content type in a block list", top("  types:", "    - text/html", "    - text/*/x"), 4, "compress.types", `"text/*/x"`},
		{"content type twice", top("  types: [text/html, TEXT/HTML]"), 4, "compress.types", `"TEXT/HTML" is listed twice`},
		{"no types", top("  types: []"), 4, "compress.types", "is empty, which would compress nothing"},
		{"bad excluded type", top("  exclude_types: [csv]"), 4, "compress.exclude_types", `"csv" is not a media type pattern`},

		// Keys.
		{"unknown key", top("  gzip_levl: 3"), 4, "compress.gzip_levl", `unknown key; did you mean "gzip_level"?`},
		{"key set twice", top("  min_length: 1024"), 4, "compress.min_length", "set twice (first at line 3)"},
		{"merge key", y(b, "pools:", "  api: {backends: [http://127.0.0.1:8002], compress: &base {gzip_level: 3}}", "compress:", "  <<: *base"), 5,
			"compress.<<", "merge keys (<<) are not supported"},

		// Values of the wrong type.
		{"level not a number", top("  gzip_level: often"), 4, "compress.gzip_level", `must be a whole number, got "often"`},
		{"level a quoted number", top(`  brotli_level: "4"`), 4, "compress.brotli_level", `must be a whole number, got "4"`},
		{"level a fraction", top("  gzip_level: 4.5"), 4, "compress.gzip_level", `must be a whole number, got "4.5"`},
		{"level too large", top("  gzip_level: 9223372036854775808"), 4, "compress.gzip_level", "is too large"},
		{"min_length a mapping", y(b, "compress:", "  encodings: [gzip]", "  min_length: {bytes: 10}"), 4, "compress.min_length",
			"must be a whole number, got a mapping"},
		{"zstd level a list", top("  zstd_level: [fastest]"), 4, "compress.zstd_level", "must be one of fastest, default, better, best, got a list"},
		{"encodings a string", top("  encodings: gzip"), 4, "compress.encodings", `must be a list, got "gzip"`},
		{"encoding a number", top("  encodings:", "    - gzip", "    - 7"), 6, "compress.encodings[1]", `must be a string, got "7"`},
		{"type a mapping", top("  types:", "    - text/html", "    - {a: b}"), 6, "compress.types[1]", "must be a string, got a mapping"},
		{"with_cookies not a bool", top("  with_cookies: yes"), 4, "compress.with_cookies", `must be true or false, got "yes"`},
		{"section a number", y(b, "compress: 5"), 2, "compress", "must be true or a mapping"},
		{"section a list", y(b, "compress: [gzip]"), 2, "compress", "must be true or a mapping"},

		// In a pool and in a route.
		{"in a pool", y(b, "pools:", "  api:", "    backends: [http://127.0.0.1:8002]", "    compress:", "      encodings: [br]", "      brotli_level: 0x10"), 7,
			"pools.api.compress.brotli_level", "16 is out of range"},
		{"wrong type in a pool", y(b, "pools:", "  api:", "    backends: [http://127.0.0.1:8002]", "    compress: {min_length: lots}"), 5,
			"pools.api.compress.min_length", `must be a whole number, got "lots"`},
		{"in a route", y(b, "routes:", "  - pool: default", "    match: {path_prefix: /a}", "    compress:", "      zstd_level: best", "      types: [application/]"), 7,
			"routes[0].compress.types", `"application/" is not a media type pattern`},
		{"unknown key in a route", y(b, "routes:", "  - pool: default", "    compress: {min_len: 10}"), 4, "routes[0].compress.min_len", "unknown key"},
	})
}

// Every problem of a section is reported, each at its own key's line.
func TestCompressProblemsTogether(t *testing.T) {
	_, err := Parse([]byte(y("backends: [http://127.0.0.1:8001]", "compress:", "  encodings: [lz4]", "  gzip_level: 0", "  brotli_level: 40",
		"  min_length: -5", "  types: [nonsense]")), "relay.yml", testOpts)
	var got []string
	for _, p := range problems(t, err) {
		got = append(got, fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Key))
	}
	// gzip_level: 0 is the default.
	want := []string{"relay.yml:3: compress.encodings", "relay.yml:5: compress.brotli_level", "relay.yml:6: compress.min_length", "relay.yml:7: compress.types"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems at %q, want %q:\n%v", got, want, err)
	}
	if first, _, _ := strings.Cut(err.Error(), "\n"); first != `relay.yml:3: compress.encodings: unknown encoding "lz4" (relay produces zstd, br and gzip)` {
		t.Errorf("first line %q", first)
	}
}

// A section that sets every key reads as compress.Config's own YAML
// decoding reads it; null keys, and `compress: true`, take the defaults.
func TestCompressSection(t *testing.T) {
	const section = `encodings: [br, gzip]
gzip_level: 6
brotli_level: 3
zstd_level: better
min_length: 512
types: [text/html, "application/*+json"]
exclude_types: [text/csv]
with_cookies: true
`
	var want compress.Config
	if err := yaml.Unmarshal([]byte(section), &want); err != nil {
		t.Fatal(err)
	}
	if wv := reflect.ValueOf(want); wv.NumField() != len(compressKeys) {
		t.Fatalf("compress.Config has %d fields and the section %d keys: the test's section must set every one", wv.NumField(), len(compressKeys))
	}
	for i := range reflect.ValueOf(want).NumField() {
		if reflect.ValueOf(want).Field(i).IsZero() {
			t.Fatalf("the test's section leaves compress.Config.%s zero", reflect.TypeOf(want).Field(i).Name)
		}
	}
	const b = "backends: [http://127.0.0.1:8001]\n"
	c := mustParse(t, b+"compress:\n"+strings.ReplaceAll("  "+strings.TrimSuffix(section, "\n"), "\n", "\n  ")+"\n")
	if c.Compress == nil || !reflect.DeepEqual(*c.Compress, want) {
		t.Errorf("compress = %+v\nwant %+v", c.Compress, want)
	}
	for _, doc := range []string{
		b + "compress: true\n",
		b + "compress: {}\n",
		b + "compress: {encodings: ~, gzip_level: ~, brotli_level: null, zstd_level: ~, min_length: ~, types: ~, exclude_types: ~, with_cookies: ~}\n",
	} {
		if c := mustParse(t, doc); c.Compress == nil || !reflect.DeepEqual(*c.Compress, compress.Config{}) {
			t.Errorf("%q: compress = %+v, want every default", doc, c.Compress)
		}
	}
	for _, doc := range []string{b, b + "compress:\n", b + "compress: false\n"} {
		if c := mustParse(t, doc); c.Compress != nil {
			t.Errorf("%q: compress = %+v, want off", doc, c.Compress)
		}
	}
}

// Hostile compress sections are problems, never a panic: aliases in
// every place, nested lists, keys that are not names, huge values.
func TestCompressHostileInput(t *testing.T) {
	for _, doc := range []string{
		"compress: {? [a, b] : 1}\n",
		"compress: {encodings: [[gzip]], types: [[[text/html]]]}\n",
		"x: &x [gzip, br]\ncompress: {encodings: *x, types: *x, exclude_types: *x}\n",
		"x: &x {a: b}\ncompress: {encodings: [*x], zstd_level: *x, with_cookies: *x, gzip_level: *x}\n",
		"x: &x 5\ncompress: {gzip_level: *x, min_length: *x, zstd_level: *x, with_cookies: *x}\n",
		"compress: &c {encodings: [gzip]}\npools: {api: {backends: [http://127.0.0.1:8002], compress: *c}}\n",
		"compress: {min_length: -9223372036854775808, gzip_level: 9223372036854775807, brotli_level: -0x8000000000000000}\n",
		"compress: {types: ['', ' ', '/', '*/', '*', '*/*+', 'a/b/c', \"\\x00/\\x00\"], exclude_types: [\"\\u00e9/\\u00e9\"]}\n",
		"compress: {encodings: ['', ' gzip', 'gzip;q=1', '*', 'x-gzip', 'br,gzip']}\n",
		"compress: {zstd_level: '', with_cookies: 1, gzip_level: .inf, brotli_level: .nan}\n",
		"compress: !!binary aGVsbG8=\n",
		"compress: {encodings: !!map {a: b}, types: !!str [x]}\n",
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%q: Parse panicked: %v", doc, r)
				}
			}()
			Parse([]byte("backends: [http://127.0.0.1:8001]\n"+doc), "test.yml", testOpts)
		}()
	}
}
