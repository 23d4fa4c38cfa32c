package hblock

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// fuzzLimits are the MaxHeaderListSize values a fuzz input picks from.
var fuzzLimits = [...]uint32{0, 64, 200, 1000, 4096, 1 << 16}

// seedBlocks are header blocks for the fuzz seeds: fields new and
// indexed, Huffman and raw, table size updates, the table's edges.
func seedBlocks() [][]byte {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func(fs ...hpack.HeaderField) []byte {
		hb.Reset()
		for _, f := range fs {
			enc.WriteField(f)
		}
		return bytes.Clone(hb.Bytes())
	}
	get := hpack.HeaderField{Name: ":method", Value: "GET"}
	path := hpack.HeaderField{Name: ":path", Value: "/svc/Method"}
	agent := hpack.HeaderField{Name: "user-agent", Value: "relay-fuzz/1.0"}
	long := hpack.HeaderField{Name: "x-long", Value: strings.Repeat("a", 300)}
	return [][]byte{
		block(get, path, agent),
		block(get, path, agent, long),
		block(hpack.HeaderField{Name: "trailer", Value: "grpc-status, grpc-message"}),
		cat(sizeUpdate(0), sizeUpdate(4096), literal("x-a", "1"), []byte{0x80 | 62, 0x80 | 61}),
		cat(plain(58, "relay", true), sizeUpdate(100), plain(58, "relay", false)),
		{0x80 | 63},
		{0x3f, 0xe1, 0x1f},
	}
}

// frames writes blocks as header blocks on streams 1, 3, ..., each cut
// into fragments of frag bytes, the first ones padded or with a priority
// as flags says.
func frames(blocks [][]byte, frag int, flags byte) []byte {
	var wire bytes.Buffer
	w := http2.NewFramer(&wire, nil)
	w.AllowIllegalWrites = true
	if frag <= 0 {
		frag = 1 << 14
	}
	for i, b := range blocks {
		id := uint32(2*i + 1)
		first := b[:min(frag, len(b))]
		rest := b[len(first):]
		hp := http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndHeaders: len(rest) == 0, EndStream: flags&1 != 0}
		if flags&2 != 0 {
			hp.PadLength = flags >> 3
		}
		if flags&4 != 0 {
			hp.Priority = http2.PriorityParam{StreamDep: uint32(flags >> 4), Weight: flags}
		}
		w.WriteHeaders(hp)
		for len(rest) > 0 {
			n := min(frag, len(rest))
			w.WriteContinuation(id, n == len(rest), rest[:n])
			rest = rest[n:]
		}
	}
	return wire.Bytes()
}

// readAll reads data as a connection's frames with the Reader, and, as
// long as both read the same frames without error, with x/net's framer
// and decoder, and fails where they differ. Blocks with a Trailer field
// are not compared: relay counts it against a budget of its own.
func readAll(t *testing.T, data []byte, limit uint32) {
	src := bytes.NewReader(data)
	fr := http2.NewFramer(nil, src)
	fr.MaxHeaderListSize = limit
	r := NewReader(fr, src)
	ref := http2.NewFramer(nil, bytes.NewReader(data))
	ref.ReadMetaHeaders = hpack.NewDecoder(DefaultTable, nil)
	ref.MaxHeaderListSize = limit
	max := limit
	if max == 0 {
		max = 16 << 20
	}
	compare := true
	for range 1000 {
		f, err := r.ReadFrame()
		if mh, ok := f.(*http2.MetaHeadersFrame); ok && err == nil && !mh.Truncated {
			var size uint32
			for _, hf := range mh.Fields {
				if hf.Name != "trailer" {
					size += hf.Size()
				}
			}
			if size > max {
				t.Fatalf("a header list of %d bytes read, over the limit of %d", size, max)
			}
		}
		if len(r.dec.carry) != 0 && err == nil {
			t.Fatalf("a carry of %d bytes left after a frame", len(r.dec.carry))
		}
		if compare {
			got := outcome(f, err)
			want := outcome(ref.ReadFrame())
			switch {
			case strings.Contains(got, `"trailer"=`) || strings.Contains(want, `"trailer"=`):
				compare = false
			case err != nil || strings.Contains(want, "error"):
				compare = false
			case got != want:
				t.Fatalf("read %s, x/net read %s", got, want)
			}
		}
		if err != nil {
			return
		}
	}
}

// FuzzReader feeds the Reader arbitrary bytes as a connection's frames:
// it must never panic, nor read a list over its limit, and reads what
// x/net's framer reads.
func FuzzReader(f *testing.F) {
	blocks := seedBlocks()
	f.Add(byte(0), frames(blocks, 0, 0))
	f.Add(byte(1), frames(blocks, 1, 1))
	f.Add(byte(2), frames(blocks, 7, 2|5<<3))
	f.Add(byte(3), frames(blocks, 3, 4|1<<4))
	f.Add(byte(4), frames([][]byte{{}}, 0, 2|4))
	f.Add(byte(5), []byte{0, 0, 1, 1, 5, 0, 0, 0, 0, 0x82})
	f.Fuzz(func(t *testing.T, lim byte, data []byte) {
		readAll(t, data, fuzzLimits[int(lim)%len(fuzzLimits)])
	})
}

// FuzzBlocks feeds the Reader arbitrary header blocks in well-formed
// frames, so that the fuzzing goes to decoding rather than framing: data
// is a run of blocks, each after a byte giving its length, cut into
// fragments of frag bytes.
func FuzzBlocks(f *testing.F) {
	seed := func(blocks [][]byte) []byte {
		var b []byte
		for _, bl := range blocks {
			for len(bl) > 255 {
				b = append(b, 255)
				b = append(b, bl[:255]...)
				bl = bl[255:]
			}
			b = append(b, byte(len(bl)))
			b = append(b, bl...)
		}
		return b
	}
	blocks := seedBlocks()
	f.Add(byte(0), byte(0), byte(0), seed(blocks))
	f.Add(byte(1), byte(1), byte(1), seed(blocks))
	f.Add(byte(2), byte(5), byte(6|3<<3), seed(blocks[3:]))
	f.Add(byte(3), byte(2), byte(4), seed(blocks[:2]))
	f.Fuzz(func(t *testing.T, lim, frag, flags byte, data []byte) {
		var blocks [][]byte
		for len(data) > 0 && len(blocks) < 64 {
			n := min(int(data[0]), len(data)-1)
			blocks = append(blocks, data[1:1+n])
			data = data[1+n:]
		}
		readAll(t, frames(blocks, int(frag), flags), fuzzLimits[int(lim)%len(fuzzLimits)])
	})
}
