package hblock

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// cutBlock writes block as a HEADERS frame and CONTINUATION frames of
// frag bytes each on stream 1.
func cutBlock(w *http2.Framer, block []byte, frag int) {
	first := block[:min(frag, len(block))]
	rest := block[len(first):]
	w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndHeaders: len(rest) == 0})
	for len(rest) > 0 {
		n := min(frag, len(rest))
		w.WriteContinuation(1, n == len(rest), rest[:n])
		rest = rest[n:]
	}
}

// TestFieldCutIntoBytesCostsItsLength sends a field of 64 KiB cut into
// CONTINUATION frames of one byte each and checks that the decoder
// copies each byte of it into the carry a bounded number of times, not
// the whole carry again for every frame (some 2 GiB of copying for this
// field, as x/net's decoder does).
func TestFieldCutIntoBytesCostsItsLength(t *testing.T) {
	value := strings.Repeat("v", 64<<10)
	block := cat(plain(4, "/first", false), plain(58, value, false))
	c := newConn()
	c.r.fr.MaxHeaderListSize = 1 << 20
	cutBlock(c.w, block, 1)
	f, err := c.r.ReadFrame()
	fs := fieldsOf(t, f, err)
	if len(fs) != 2 || fs[0].Value != "/first" || fs[1].Value != value {
		t.Fatalf("cut block read as %d fields", len(fs))
	}
	if got, bound := c.r.dec.carried, int64(2*len(block)); got > bound {
		t.Fatalf("a %d-byte block cut into 1-byte frames copied %d bytes into the carry, want at most %d", len(block), got, bound)
	}
}

// TestCarryGoesWithItsBlock checks that the buffer a long field cut
// across frames was gathered in is not kept once its block has been
// read.
func TestCarryGoesWithItsBlock(t *testing.T) {
	c := newConn()
	c.r.fr.MaxHeaderListSize = 256 << 10
	value := strings.Repeat("v", 100<<10)
	cutBlock(c.w, plain(58, value, false), 16<<10)
	f, err := c.r.ReadFrame()
	if fs := fieldsOf(t, f, err); len(fs) != 1 || fs[0].Value != value {
		t.Fatalf("long field read as %d fields", len(fs))
	}
	if n := cap(c.r.dec.carry); n > 4<<10 {
		t.Fatalf("after the block, the carry holds %d bytes", n)
	}
	c.id = 3
	if fs := c.fields(t, plain(4, "/next", false)); len(fs) != 1 || fs[0].Value != "/next" {
		t.Fatalf("next block read as %v", fs)
	}
}

// TestLongListGoesWithItsBlock checks that the list of a block of many
// fields, each a byte on the wire, is not kept once the next frame is
// read: 1,500 fields are 60 KiB of list for 1.5 KB sent.
func TestLongListGoesWithItsBlock(t *testing.T) {
	c := newConn()
	c.r.fr.MaxHeaderListSize = 1 << 20
	block := bytes.Repeat([]byte{0x80 | 16}, 1500) // accept-encoding: gzip, deflate
	if fs := c.fields(t, block); len(fs) != 1500 {
		t.Fatalf("read %d fields, want 1500", len(fs))
	}
	c.w.WritePing(false, [8]byte{1})
	if f, err := c.r.ReadFrame(); err != nil || f.Header().Type != http2.FramePing {
		t.Fatalf("after the block: %v, %v; want the PING", f, err)
	}
	if n := cap(c.r.meta.Fields); n > keptFields {
		t.Fatalf("after the next frame, the Reader keeps room for %d fields", n)
	}
	if fs := c.fields(t, []byte{0x82}); len(fs) != 1 || fs[0].Value != "GET" {
		t.Fatalf("next block read as %v", fs)
	}
}

// TestBlockCutEvenly sends a block over frames of every size, so that
// fragments end fields and begin others, both in the carry.
func TestBlockCutEvenly(t *testing.T) {
	block := cat(plain(4, "/svc/Method", true), literal("x-first", "one"), []byte{0x80 | 62},
		plain(58, "relay-test/1.0", false), plain(58, strings.Repeat("u", 200), true))
	want := []string{":path=/svc/Method", "x-first=one", "x-first=one", "user-agent=relay-test/1.0", "user-agent=" + strings.Repeat("u", 200)}
	for frag := 1; frag <= len(block); frag++ {
		c := newConn()
		cutBlock(c.w, block, frag)
		f, err := c.r.ReadFrame()
		var got []string
		for _, hf := range fieldsOf(t, f, err) {
			got = append(got, hf.Name+"="+hf.Value)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("cut every %d bytes: read %q", frag, got)
		}
	}
}
