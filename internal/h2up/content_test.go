package h2up

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
)

// head is a request head for method and path.
func head(method, path string) []hpack.HeaderField {
	fs := get(path)
	fs[0].Value = method
	return fs
}

// A response's DATA must add up to its content-length (RFC 9113 8.1.1):
// past it or short of it at the end, the stream fails rather than hand
// its reader a body that disagrees with its head. A response defined to
// have no content (to HEAD, 204, 304) may say any content-length and must
// carry none.
func TestContentMustMatchItsLength(t *testing.T) {
	type frame struct {
		head bool // a header block; else DATA
		end  bool
		kv   []string // the block's fields, or the DATA's payload
	}
	h := func(end bool, kv ...string) frame { return frame{head: true, end: end, kv: kv} }
	d := func(end bool, p string) frame { return frame{end: end, kv: []string{p}} }
	cases := []struct {
		name   string
		method string
		frames []frame
		ok     bool
	}{
		{"exact", "GET", []frame{h(false, ":status", "200", "content-length", "5"), d(false, "he"), d(true, "llo")}, true},
		{"exact with trailers", "GET", []frame{h(false, ":status", "200", "content-length", "2"), d(false, "ok"), h(true, "x-t", "1")}, true},
		{"no length", "GET", []frame{h(false, ":status", "200"), d(true, "anything")}, true},
		{"past", "GET", []frame{h(false, ":status", "200", "content-length", "2"), d(true, "three")}, false},
		{"short", "GET", []frame{h(false, ":status", "200", "content-length", "9"), d(true, "short")}, false},
		{"short at the trailers", "GET", []frame{h(false, ":status", "200", "content-length", "9"), d(false, "short"), h(true, "x-t", "1")}, false},
		{"head ends a promised body", "GET", []frame{h(true, ":status", "200", "content-length", "9")}, false},
		{"HEAD with a length", "HEAD", []frame{h(true, ":status", "200", "content-length", "9")}, true},
		{"HEAD with content", "HEAD", []frame{h(false, ":status", "200", "content-length", "9"), d(true, "content")}, false},
		{"304 with a length", "GET", []frame{h(false, ":status", "304", "content-length", "9"), d(true, "")}, true},
		{"204 with content", "GET", []frame{h(false, ":status", "204"), d(true, "content")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, f := fakeBackend(t, Options{})
			s := c.Open()
			defer s.Close()
			if err := s.WriteHead(head(tc.method, "/"), true); err != nil {
				t.Fatal(err)
			}
			id := f.until("HEADERS", isHeaders).Header().StreamID
			for _, fr := range tc.frames {
				if fr.head {
					f.head(id, fr.end, fr.kv...)
				} else {
					f.write(func() { f.fr.WriteData(id, fr.end, []byte(fr.kv[0])) })
				}
			}
			s.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := s.ReadHead()
			if err == nil {
				_, err = readAll(t, s)
			}
			if tc.ok && err != nil {
				t.Fatalf("a well-framed response failed: %v", err)
			}
			if !tc.ok && (err == nil || errors.Is(err, ErrRefused)) {
				t.Fatalf("a response whose content disagrees with its head read as %v, want a stream error", err)
			}
		})
	}
}
