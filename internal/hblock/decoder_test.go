package hblock

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// conn is the reading end of a connection whose frames a test writes
// raw.
type conn struct {
	wire bytes.Buffer
	w    *http2.Framer
	r    *Reader
	id   uint32
}

func newConn() *conn {
	c := &conn{id: 1}
	c.w = http2.NewFramer(&c.wire, nil)
	c.r = NewReader(http2.NewFramer(nil, &c.wire), &c.wire)
	return c
}

// block sends a header block in one HEADERS frame on a new stream and
// reads it back.
func (c *conn) block(b []byte) (http2.Frame, error) {
	c.w.WriteHeaders(http2.HeadersFrameParam{StreamID: c.id, BlockFragment: b, EndHeaders: true})
	c.id += 2
	return c.r.ReadFrame()
}

// fields sends a header block as block does and returns its fields.
func (c *conn) fields(t *testing.T, b []byte) []hpack.HeaderField {
	t.Helper()
	f, err := c.block(b)
	return fieldsOf(t, f, err)
}

func fieldsOf(t *testing.T, f http2.Frame, err error) []hpack.HeaderField {
	t.Helper()
	if err != nil {
		t.Fatalf("block: %v", err)
	}
	return f.(*http2.MetaHeadersFrame).Fields
}

func isCompression(err error) bool {
	ce, ok := err.(http2.ConnectionError)
	return ok && http2.ErrCode(ce) == http2.ErrCodeCompression
}

// literal is a field with incremental indexing, its name and value raw.
func literal(name, value string) []byte {
	b := []byte{0x40}
	b = appendRaw(b, name)
	return appendRaw(b, value)
}

// plain is a field without indexing, named by static index idx.
func plain(idx uint64, value string, huff bool) []byte {
	b := appendInt(nil, 0, 4, idx)
	if huff {
		b = appendInt(b, 0x80, 7, hpack.HuffmanEncodeLength(value))
		return hpack.AppendHuffmanString(b, value)
	}
	return appendRaw(b, value)
}

func sizeUpdate(v uint64) []byte { return appendInt(nil, 0x20, 5, v) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestTableSizeUpdates(t *testing.T) {
	c := newConn()
	c.fields(t, literal("x-a", "1"))
	c.fields(t, literal("x-b", "2"))
	// Two updates before the block's first field, the table not emptied
	// by the first: RFC 7541 4.2 allows them (x/net's decoder does not).
	fs := c.fields(t, cat(sizeUpdate(50), sizeUpdate(200), []byte{0x80 | 62}))
	if len(fs) != 1 || fs[0].Name != "x-b" || fs[0].Value != "2" {
		t.Fatalf("after two updates, index 62 is %v, want x-b: 2", fs)
	}
	// The first update, to 50, left room for one entry of 36: x-a went.
	if _, err := c.block([]byte{0x80 | 63}); !isCompression(err) {
		t.Fatalf("index 63 after eviction: %v, want a compression error", err)
	}

	c = newConn()
	c.fields(t, literal("x-a", "1"))
	if _, err := c.block(cat([]byte{0x80 | 62}, sizeUpdate(0))); !isCompression(err) {
		t.Fatalf("update after a field, table not empty: %v, want a compression error", err)
	}

	c = newConn()
	// An empty table may be resized anywhere, as x/net's decoder allows.
	c.fields(t, cat(plain(58, "a", false), sizeUpdate(0), plain(58, "b", false)))
	if _, err := c.block(sizeUpdate(DefaultTable + 1)); !isCompression(err) {
		t.Fatalf("update past the size relay allows: %v, want a compression error", err)
	}
}

func TestMalformedBlocksAreCompressionErrors(t *testing.T) {
	cases := map[string][]byte{
		"index 0":               {0x80},
		"index past the tables": {0x80 | 70},
		"name index past":       cat(appendInt([]byte(nil), 0, 4, 70), appendRaw(nil, "v")),
		"integer overflow":      {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"cut inside a field":    literal("x-a", "value")[:5],
		"cut inside a length":   {0x40, 0x7f},
		"bad Huffman":           {0x04, 0x81, 0xff}, // EOS padding longer than 7 bits
		"string too long":       cat([]byte{0x04}, appendInt(nil, 0, 7, 1<<20)),
	}
	for name, b := range cases {
		c := newConn()
		c.r.fr.MaxHeaderListSize = 1000
		if _, err := c.block(b); !isCompression(err) {
			t.Errorf("%s: %v, want a compression error", name, err)
		}
	}
}

// TestBlockCutAnywhere sends a block over CONTINUATION frames cut at
// every place, fields and lengths included.
func TestBlockCutAnywhere(t *testing.T) {
	block := cat(plain(4, "/svc/Method", true), literal("x-first", "one"), []byte{0x80 | 62},
		plain(58, "relay-test/1.0", false))
	for cut := 1; cut < len(block); cut++ {
		c := newConn()
		c.w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:cut]})
		c.w.WriteContinuation(1, true, block[cut:])
		f, err := c.r.ReadFrame()
		fs := fieldsOf(t, f, err)
		want := []hpack.HeaderField{{Name: ":path", Value: "/svc/Method"}, {Name: "x-first", Value: "one"},
			{Name: "x-first", Value: "one"}, {Name: "user-agent", Value: "relay-test/1.0"}}
		if len(fs) != len(want) {
			t.Fatalf("cut at %d: %v", cut, fs)
		}
		for i := range want {
			if fs[i] != want[i] {
				t.Fatalf("cut at %d: field %d is %v, want %v", cut, i, fs[i], want[i])
			}
		}
	}
}

// TestRepeatedLiteralsAreNotDecodedAgain checks that a string that comes
// as the same bytes in the same place as in the last block costs no
// allocation, and that one that differs, even in a byte or in its
// coding alone, is decoded.
func TestRepeatedLiteralsAreNotDecodedAgain(t *testing.T) {
	c := newConn()
	path := plain(4, "/svc/Method1", true)
	agent := plain(58, "relay-test/1.0", false)
	block := cat(path, agent)
	c.fields(t, block)
	allocs := testing.AllocsPerRun(100, func() {
		fs := c.fields(t, block)
		if fs[0].Value != "/svc/Method1" || fs[1].Value != "relay-test/1.0" {
			t.Fatalf("repeated block read as %v", fs)
		}
	})
	if allocs != 0 {
		t.Errorf("a repeated block cost %v allocations, want 0", allocs)
	}
	for _, tc := range []struct {
		block []byte
		want  string
	}{
		{cat(plain(4, "/svc/Method2", true), agent), "/svc/Method2"},
		{cat(plain(4, "/svc/Method2", false), agent), "/svc/Method2"},
		{cat(agent, agent), "relay-test/1.0"},
		{cat(plain(4, "/svc/Method1", true), agent), "/svc/Method1"},
	} {
		fs := c.fields(t, tc.block)
		if fs[0].Value != tc.want || fs[1].Value != "relay-test/1.0" {
			t.Fatalf("block read as %v, want %s first", fs, tc.want)
		}
	}
}

// TestFrameErrors checks the HEADERS frames that are wrong as frames.
func TestFrameErrors(t *testing.T) {
	cases := []struct {
		name  string
		flags http2.Flags
		id    uint32
		p     []byte
		want  http2.ErrCode
	}{
		{"stream 0", http2.FlagHeadersEndHeaders, 0, []byte{0x82}, http2.ErrCodeProtocol},
		{"padding past the payload", http2.FlagHeadersEndHeaders | http2.FlagHeadersPadded, 1, []byte{2, 0x82}, http2.ErrCodeProtocol},
		{"no pad length", http2.FlagHeadersEndHeaders | http2.FlagHeadersPadded, 1, nil, http2.ErrCodeFrameSize},
		{"priority cut", http2.FlagHeadersEndHeaders | http2.FlagHeadersPriority, 1, []byte{0, 0, 0}, http2.ErrCodeFrameSize},
	}
	for _, tc := range cases {
		c := newConn()
		c.w.WriteRawFrame(http2.FrameHeaders, tc.flags, tc.id, tc.p)
		_, err := c.r.ReadFrame()
		if ce, ok := err.(http2.ConnectionError); !ok || http2.ErrCode(ce) != tc.want {
			t.Errorf("%s: %v, want connection error %v", tc.name, err, tc.want)
		}
	}
	c := newConn()
	c.w.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersEndHeaders|http2.FlagHeadersPadded|http2.FlagHeadersPriority, 3,
		[]byte{1, 0x80, 0, 0, 1, 200, 0x82, 0})
	f, err := c.r.ReadFrame()
	fs := fieldsOf(t, f, err)
	mh := f.(*http2.MetaHeadersFrame)
	if len(fs) != 1 || fs[0].Value != "GET" || mh.Priority != (http2.PriorityParam{StreamDep: 1, Exclusive: true, Weight: 200}) {
		t.Fatalf("padded HEADERS with priority read as %v, %+v", fs, mh.Priority)
	}
}
