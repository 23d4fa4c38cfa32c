package compress

import (
	"fmt"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Config is the `compress:` section of relay's configuration, decoded
// from YAML as it stands. A zero field takes its default (DefaultConfig),
// so an empty section compresses with the defaults.
type Config struct {
	// Encodings are the codings relay may produce, in the server's order
	// of preference: a client that weighs two of them alike gets the
	// first listed. Default zstd, br, gzip: zstd is the cheapest for its
	// ratio, br the densest on text, gzip what every client has.
	Encodings []string `yaml:"encodings"`
	// GzipLevel is gzip's level, 1 (fastest) to 9 (densest); 0 means
	// the default, 5.
	GzipLevel int `yaml:"gzip_level"`
	// BrotliLevel is brotli's quality, 1 to 11; 0 means the default, 4.
	// Each compressing stream's memory grows with it, to 34 MiB at 9
	// (the package documentation lists every level).
	BrotliLevel int `yaml:"brotli_level"`
	// ZstdLevel is zstd's level by name: fastest, default, better, best
	// (about zstd -1, -3, -7 and -11); "" means the default, fastest.
	ZstdLevel string `yaml:"zstd_level"`
	// MinLength is the smallest Content-Length compressed; 0 means the
	// default, 1024: below about a kilobyte the coding's header, trailer and the
	// encoder's setup cost more than they save. A body of unknown length
	// is compressed whatever its size.
	MinLength int64 `yaml:"min_length"`
	// Types are the media types compressed, each TYPE/SUBTYPE, TYPE/*,
	// TYPE/*+SUFFIX (application/*+json), */*+SUFFIX or */*; compared
	// case-insensitively and without parameters. Default DefaultTypes.
	Types []string `yaml:"types"`
	// ExcludeTypes are media types never compressed even where Types
	// match them, in the same patterns (text/csv under text/*, say).
	ExcludeTypes []string `yaml:"exclude_types"`
	// WithCookies compresses responses that set cookies too. Off by
	// default: a compressed response's length can reveal a secret it
	// carries to an attacker who can inject guesses into the same
	// response (BREACH), and a Set-Cookie response is the likeliest to
	// carry one.
	WithCookies bool `yaml:"with_cookies"`
}

// The defaults of Config's fields, chosen for a proxy that compresses
// on the fly for many clients at once: cheap levels, whose ratio is
// close to the dense ones' on text (the package documentation has the
// figures).
const (
	// DefaultGzipLevel is gzip's level 5, the knee of klauspost's levels
	// on HTML and JSON: level 6 (zlib's default) saves another 1 to 2%
	// for a fifth to a third more CPU, level 4 takes a fifth less CPU
	// for 5 to 9% more bytes.
	DefaultGzipLevel = 5
	// DefaultBrotliLevel is brotli's quality 4, the last of its fast
	// qualities: denser than gzip 6 on real pages and JSON (by a quarter
	// on JSON), while quality 5 switches to slower hashers that take 40
	// to 70% more CPU per byte and a quarter more memory.
	DefaultBrotliLevel = 4
	// DefaultZstdLevel is zstd's fastest level, about zstd -1: the
	// cheapest of every coding and level relay offers, 1.4 to 1.5 times
	// gzip 5's speed and about as dense (denser on JSON, a little less
	// on HTML), in the least memory.
	DefaultZstdLevel = "fastest"
	// DefaultMinLength is the smallest Content-Length compressed.
	DefaultMinLength = 1024
)

// DefaultEncodings is the default server order of Config.Encodings.
var DefaultEncodings = []string{"zstd", "br", "gzip"}

// DefaultTypes is the default of Config.Types: text and the formats
// written as text (JSON, XML, JavaScript, SVG, WebAssembly's binary,
// which compresses well too) and the font formats that are not
// compressed already. font/woff and font/woff2 are left out on purpose:
// they are zlib and brotli inside, so font/* would spend CPU for nothing.
var DefaultTypes = []string{
	"text/*",
	"application/json",
	"application/*+json",
	"application/x-ndjson",
	"application/javascript",
	"application/x-javascript",
	"application/ecmascript",
	"application/xml",
	"application/*+xml",
	"application/yaml",
	"application/x-yaml",
	"application/toml",
	"application/wasm",
	"application/vnd.ms-fontobject",
	"application/x-font-ttf",
	"application/x-font-otf",
	"application/x-font-opentype",
	"application/font-sfnt",
	"font/ttf",
	"font/otf",
	"font/sfnt",
	"font/collection",
	"image/svg+xml",
	"image/x-icon",
	"image/vnd.microsoft.icon",
	"image/bmp",
}

// zstdLevels names zstd's levels as relay's configuration spells them.
var zstdLevels = []struct {
	name  string
	level zstd.EncoderLevel
}{
	{"fastest", zstd.SpeedFastest},
	{"default", zstd.SpeedDefault},
	{"better", zstd.SpeedBetterCompression},
	{"best", zstd.SpeedBestCompression},
}

// DefaultConfig is the Config an empty `compress:` section means.
func DefaultConfig() Config {
	return Config{}.WithDefaults()
}

// WithDefaults returns c with every zero field given its default.
func (c Config) WithDefaults() Config {
	if len(c.Encodings) == 0 {
		c.Encodings = DefaultEncodings
	}
	if c.GzipLevel == 0 {
		c.GzipLevel = DefaultGzipLevel
	}
	if c.BrotliLevel == 0 {
		c.BrotliLevel = DefaultBrotliLevel
	}
	if c.ZstdLevel == "" {
		c.ZstdLevel = DefaultZstdLevel
	}
	if c.MinLength == 0 {
		c.MinLength = DefaultMinLength
	}
	if len(c.Types) == 0 {
		c.Types = DefaultTypes
	}
	return c
}

// Check returns every problem in c, each naming its key as relay's
// configuration spells it (compress.encodings: unknown encoding "lz4"),
// or nil when c is valid. The rules live here, once: relay's config
// package calls Check and New enforces it.
func (c *Config) Check() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("compress."+key+": "+format, args...))
	}

	// An explicit empty list is most likely a mistake: leaving the key
	// out gives the default, and nothing turns into no compression.
	if c.Encodings != nil && len(c.Encodings) == 0 {
		bad("encodings", "is empty; leave the key out for the default %s", strings.Join(DefaultEncodings, ", "))
	}
	var seen [numEncodings]bool
	for _, s := range c.Encodings {
		e, err := ParseEncoding(s)
		switch {
		case err != nil:
			bad("encodings", "unknown encoding %q (relay produces zstd, br and gzip)", s)
		case e == Identity:
			bad("encodings", "%q is not a compression; leave it out (relay sends the body as it is whenever a client accepts none of the others)", s)
		case seen[e]:
			bad("encodings", "%q is listed twice (as %s)", s, e)
		default:
			seen[e] = true
		}
	}

	if c.GzipLevel != 0 && (c.GzipLevel < 1 || c.GzipLevel > 9) {
		bad("gzip_level", "%d is out of range: 1 (fastest) to 9 (densest), default %d", c.GzipLevel, DefaultGzipLevel)
	}
	if c.BrotliLevel != 0 && (c.BrotliLevel < 1 || c.BrotliLevel > 11) {
		bad("brotli_level", "%d is out of range: 1 (fastest) to 11 (densest), default %d", c.BrotliLevel, DefaultBrotliLevel)
	}
	if c.ZstdLevel != "" {
		if _, ok := zstdLevel(c.ZstdLevel); !ok {
			bad("zstd_level", "%q is not one of fastest, default, better, best", c.ZstdLevel)
		}
	}
	if c.MinLength < 0 {
		bad("min_length", "%d is negative; give a length in bytes, 0 for the default %d", c.MinLength, DefaultMinLength)
	}

	if c.Types != nil && len(c.Types) == 0 {
		bad("types", "is empty, which would compress nothing; leave the key out for the default list")
	}
	checkTypes := func(key string, list []string) {
		seen := make(map[string]bool, len(list))
		for _, s := range list {
			pat, err := parsePattern(s)
			if err != nil {
				bad(key, "%q %v", s, err)
				continue
			}
			if seen[pat.String()] {
				bad(key, "%q is listed twice", s)
			}
			seen[pat.String()] = true
		}
	}
	checkTypes("types", c.Types)
	checkTypes("exclude_types", c.ExcludeTypes)
	return errs
}

// zstdLevel returns the zstd level a configuration name stands for.
func zstdLevel(name string) (zstd.EncoderLevel, bool) {
	for _, l := range zstdLevels {
		if name == l.name {
			return l.level, true
		}
	}
	return 0, false
}
