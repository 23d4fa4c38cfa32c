package hblock

import (
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

func isConnError(err error, code http2.ErrCode) bool {
	ce, ok := err.(http2.ConnectionError)
	return ok && http2.ErrCode(ce) == code
}

// TestTableEdges checks indexes at the edges of the tables: the last
// static entry, the newest and the oldest dynamic ones, one past, and
// the same after entries are evicted by an update and by a field that
// fills or overflows the table.
func TestTableEdges(t *testing.T) {
	c := newConn()
	field := func(b []byte) hpack.HeaderField {
		t.Helper()
		fs := c.fields(t, b)
		if len(fs) != 1 {
			t.Fatalf("read %v, want one field", fs)
		}
		return fs[0]
	}
	past := func(i byte) {
		t.Helper()
		if _, err := c.block([]byte{0x80 | i}); !isCompression(err) {
			t.Fatalf("index %d: %v, want a compression error", i, err)
		}
		c = newConn()
	}
	if f := field([]byte{0x80 | 61}); f.Name != "www-authenticate" || f.Value != "" {
		t.Fatalf("index 61 is %v", f)
	}
	past(62)
	c.fields(t, literal("x-a", "1")) // 36 bytes each
	c.fields(t, literal("x-b", "2"))
	c.fields(t, literal("x-c", "3"))
	if f := field([]byte{0x80 | 62}); f.Name != "x-c" {
		t.Fatalf("index 62, the newest, is %v", f)
	}
	if f := field([]byte{0x80 | 64}); f.Name != "x-a" {
		t.Fatalf("index 64, the oldest, is %v", f)
	}
	// Down to two entries: the oldest goes.
	if fs := c.fields(t, cat(sizeUpdate(72), []byte{0x80 | 63})); len(fs) != 1 || fs[0].Name != "x-b" {
		t.Fatalf("after an update to 72, index 63 is %v", fs)
	}
	if _, err := c.block([]byte{0x80 | 64}); !isCompression(err) {
		t.Fatalf("index 64 after eviction: %v", err)
	}

	c = newConn()
	c.fields(t, cat(sizeUpdate(72), literal("x-a", "1"), literal("x-b", "2")))
	// An entry of exactly the table's size evicts all others.
	v := strings.Repeat("v", 72-32-4)
	if fs := c.fields(t, cat(literal("x-dd", v), []byte{0x80 | 62})); len(fs) != 2 || fs[1].Name != "x-dd" || fs[1].Value != v {
		t.Fatalf("an entry the table's size read as %v", fs)
	}
	if f := field([]byte{0x80 | 62}); f.Value != v {
		t.Fatalf("index 62 after a full-size entry is %v", f)
	}
	past(63)
	c.fields(t, cat(sizeUpdate(72), literal("x-a", "1")))
	// One larger than the table empties it, and is not added.
	if fs := c.fields(t, literal("x-dd", v+"w")); len(fs) != 1 || fs[0].Value != v+"w" {
		t.Fatalf("an entry larger than the table read as %v", fs)
	}
	past(62)
}

// TestFrameEdges checks padding and priority at their limits, and
// header blocks out of order.
func TestFrameEdges(t *testing.T) {
	const endH, padded, prio = http2.FlagHeadersEndHeaders, http2.FlagHeadersPadded, http2.FlagHeadersPriority
	for _, tc := range []struct {
		name  string
		flags http2.Flags
		p     []byte
		want  int // fields read, or -1 for a protocol error, -2 for a frame size error
	}{
		{"padding all the rest", endH | padded, []byte{2, 0, 0}, 0},
		{"padding the payload's length", endH | padded, []byte{3, 0, 0}, -1},
		{"padding and a field", endH | padded, []byte{1, 0x82, 0}, 1},
		{"priority alone", endH | prio, []byte{0, 0, 0, 3, 16}, 0},
		{"priority and a field", endH | prio, []byte{0, 0, 0, 3, 16, 0x82}, 1},
		{"priority cut by one", endH | prio, []byte{0, 0, 0, 3}, -2},
		{"padded priority, no padding", endH | padded | prio, []byte{0, 0, 0, 0, 3, 16}, 0},
		{"padded priority, padding past", endH | padded | prio, []byte{1, 0, 0, 0, 3, 16}, -1},
		{"padded priority, cut", endH | padded | prio, []byte{0, 0, 0, 0, 3}, -2},
	} {
		c := newConn()
		c.w.WriteRawFrame(http2.FrameHeaders, tc.flags, 1, tc.p)
		f, err := c.r.ReadFrame()
		switch tc.want {
		case -1:
			if !isConnError(err, http2.ErrCodeProtocol) {
				t.Errorf("%s: %v, want a protocol error", tc.name, err)
			}
		case -2:
			if !isConnError(err, http2.ErrCodeFrameSize) {
				t.Errorf("%s: %v, want a frame size error", tc.name, err)
			}
		default:
			if err != nil || len(f.(*http2.MetaHeadersFrame).Fields) != tc.want {
				t.Errorf("%s: %v, %v; want %d fields", tc.name, f, err, tc.want)
			}
		}
	}

	order := []struct {
		name  string
		write func(w *http2.Framer)
	}{
		{"CONTINUATION without HEADERS", func(w *http2.Framer) { w.WriteContinuation(1, true, []byte{0x82}) }},
		{"HEADERS in another stream's block", func(w *http2.Framer) {
			w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}})
			w.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0x82}, EndHeaders: true})
		}},
		{"CONTINUATION of another stream", func(w *http2.Framer) {
			w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}})
			w.WriteContinuation(3, true, []byte{0x84})
		}},
		{"DATA inside a block", func(w *http2.Framer) {
			w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x82}})
			w.WriteData(1, false, []byte("x"))
		}},
		{"HEADERS on stream 0 with CONTINUATION", func(w *http2.Framer) {
			w.WriteHeaders(http2.HeadersFrameParam{StreamID: 0, BlockFragment: []byte{0x82}})
			w.WriteContinuation(0, true, []byte{0x84})
		}},
	}
	for _, tc := range order {
		c := newConn()
		c.w.AllowIllegalWrites = true
		tc.write(c.w)
		if _, err := c.r.ReadFrame(); !isConnError(err, http2.ErrCodeProtocol) {
			t.Errorf("%s: %v, want a protocol error", tc.name, err)
		}
	}
}

// TestRememberedStringsInPlace checks strings the decoder remembers
// against the same bytes in other places, as names and as values, and
// that fields kept from a block stay as they were read.
func TestRememberedStringsInPlace(t *testing.T) {
	c := newConn()
	a, b := plain(58, "/a", false), plain(58, "/b", true)
	first := c.fields(t, cat(a, b))
	kept := append([]hpack.HeaderField(nil), first...)
	for _, tc := range []struct {
		block []byte
		want  []string
	}{
		{cat(b, a), []string{"user-agent=/b", "user-agent=/a"}},
		{cat(a, b), []string{"user-agent=/a", "user-agent=/b"}},
		// The same bytes as a name, and as a name and a value.
		{cat([]byte{0}, appendRaw(nil, "x-a"), appendRaw(nil, "x-a")), []string{"x-a=x-a"}},
		{cat([]byte{0}, appendRaw(nil, "/a"), appendRaw(nil, "x")), []string{"/a=x"}},
		{cat(plain(58, "/c", false), plain(58, "/d", false)), []string{"user-agent=/c", "user-agent=/d"}},
	} {
		f, err := c.block(tc.block)
		if tc.want[0] == "/a=x" {
			// "/a" is no valid name: the stream is refused, the
			// connection goes on.
			if _, ok := err.(http2.StreamError); !ok {
				t.Fatalf("field named /a: %v, want a stream error", err)
			}
			continue
		}
		fs := fieldsOf(t, f, err)
		var got []string
		for _, hf := range fs {
			got = append(got, hf.Name+"="+hf.Value)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Fatalf("read %v, want %v", got, tc.want)
		}
	}
	if kept[0].Value != "/a" || kept[1].Value != "/b" {
		t.Fatalf("fields kept from the first block became %v", kept)
	}
}
