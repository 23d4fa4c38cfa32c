package compress

import (
	"strings"
	"testing"
)

func TestCompressible(t *testing.T) {
	custom := Config{
		Types:        []string{"text/*", "application/*+json", "*/*+xml", "Application/JavaScript", "font/ttf"},
		ExcludeTypes: []string{"text/csv", "application/*+xml", "application/problem+json"},
		MinLength:    100,
	}
	everything := Config{Types: []string{"*/*"}, ExcludeTypes: []string{"image/*"}, MinLength: 1}
	tests := []struct {
		name        string
		config      Config
		contentType string
		length      int64
		want        bool
	}{
		// The defaults.
		{name: "html", contentType: "text/html", length: 5000, want: true},
		{name: "html with charset", contentType: "text/html; charset=utf-8", length: 5000, want: true},
		{name: "html without space before parameter", contentType: "text/html;charset=utf-8", length: 5000, want: true},
		{name: "upper case", contentType: "TEXT/HTML; Charset=UTF-8", length: 5000, want: true},
		{name: "leading whitespace", contentType: " \ttext/css", length: 5000, want: true},
		{name: "whitespace before parameter", contentType: "text/css ; charset=utf-8", length: 5000, want: true},
		{name: "trailing whitespace", contentType: "text/css  ", length: 5000, want: true},
		{name: "json", contentType: "application/json", length: 5000, want: true},
		{name: "json suffix", contentType: "application/ld+json", length: 5000, want: true},
		{name: "problem json", contentType: "application/problem+json; charset=utf-8", length: 5000, want: true},
		{name: "xml suffix", contentType: "application/atom+xml", length: 5000, want: true},
		{name: "svg", contentType: "image/svg+xml", length: 5000, want: true},
		{name: "wasm", contentType: "application/wasm", length: 5000, want: true},
		{name: "javascript", contentType: "application/javascript", length: 5000, want: true},
		{name: "text javascript", contentType: "text/javascript", length: 5000, want: true},
		{name: "ttf font", contentType: "font/ttf", length: 5000, want: true},
		{name: "eot font", contentType: "application/vnd.ms-fontobject", length: 5000, want: true},
		{name: "woff2 is compressed already", contentType: "font/woff2", length: 5000, want: false},
		{name: "png", contentType: "image/png", length: 5000, want: false},
		{name: "octet stream", contentType: "application/octet-stream", length: 5000, want: false},
		{name: "gzip file", contentType: "application/gzip", length: 5000, want: false},
		{name: "suffix of another type", contentType: "image/ld+json", length: 5000, want: false},
		{name: "event stream", contentType: "text/event-stream", length: -1, want: false},
		{name: "event stream upper case with parameter", contentType: "Text/Event-Stream; charset=utf-8", length: 5000, want: false},
		{name: "no content type", contentType: "", length: 5000, want: false},
		{name: "no subtype", contentType: "text/", length: 5000, want: false},
		{name: "no type", contentType: "/html", length: 5000, want: false},
		{name: "no slash", contentType: "text", length: 5000, want: false},
		{name: "two slashes", contentType: "text/html/x", length: 5000, want: false},
		{name: "garbage after type", contentType: "text/html x", length: 5000, want: false},
		{name: "control byte", contentType: "text/ht\x00ml", length: 5000, want: false},
		{name: "longer than any media type", contentType: "text/" + strings.Repeat("a", 300), length: 5000, want: false},
		{name: "length below min", contentType: "text/html", length: 1023, want: false},
		{name: "length at min", contentType: "text/html", length: 1024, want: true},
		{name: "length zero", contentType: "text/html", length: 0, want: false},
		{name: "length unknown", contentType: "text/html", length: -1, want: true},

		// Configured lists.
		{name: "custom wildcard type", config: custom, contentType: "text/plain", length: 100, want: true},
		{name: "custom excluded under wildcard", config: custom, contentType: "text/csv; header=present", length: 100, want: false},
		{name: "custom suffix", config: custom, contentType: "application/vnd.api+json", length: 100, want: true},
		{name: "custom excluded exact under suffix", config: custom, contentType: "application/problem+json", length: 100, want: false},
		{name: "custom any type suffix", config: custom, contentType: "image/svg+xml", length: 100, want: true},
		{name: "custom excluded suffix of one type", config: custom, contentType: "application/rss+xml", length: 100, want: false},
		{name: "custom pattern written in upper case", config: custom, contentType: "application/javascript", length: 100, want: true},
		{name: "custom not listed", config: custom, contentType: "application/json", length: 100, want: false},
		{name: "custom exact", config: custom, contentType: "font/ttf", length: 100, want: true},
		{name: "custom min length", config: custom, contentType: "text/plain", length: 99, want: false},
		{name: "custom event stream still excluded", config: custom, contentType: "text/event-stream", length: 100, want: false},
		{name: "everything", config: everything, contentType: "application/octet-stream", length: 1, want: true},
		{name: "everything but images", config: everything, contentType: "image/svg+xml", length: 1, want: false},
		{name: "everything but the event stream", config: everything, contentType: "text/event-stream", length: 1, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustNew(t, tt.config)
			if got := p.Compressible([]byte(tt.contentType), tt.length); got != tt.want {
				t.Errorf("Compressible(%q, %d) = %v, want %v", tt.contentType, tt.length, got, tt.want)
			}
		})
	}
}

func TestCompressibleAllocs(t *testing.T) {
	p := mustNew(t, Config{ExcludeTypes: []string{"text/csv"}})
	values := [][]byte{
		[]byte("text/html; charset=utf-8"),
		[]byte("Application/Problem+JSON"),
		[]byte("image/png"),
		[]byte("text/csv"),
		[]byte("text/event-stream"),
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, v := range values {
			p.Compressible(v, 4096)
		}
	})
	if allocs != 0 {
		t.Errorf("Compressible allocates %.1f times per call, want 0", allocs/float64(len(values)))
	}
}

func TestWithCookies(t *testing.T) {
	if mustNew(t, Config{}).WithCookies() {
		t.Error("WithCookies is on by default; BREACH wants it off")
	}
	if !mustNew(t, Config{WithCookies: true}).WithCookies() {
		t.Error("WithCookies: true is not kept")
	}
}
