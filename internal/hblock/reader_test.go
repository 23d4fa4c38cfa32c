package hblock

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// outcome is what reading one header block came to, in terms both
// readers can be compared by.
func outcome(f http2.Frame, err error) string {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("stream error %d %v", se.StreamID, se.Code)
	case errors.As(err, &ce):
		return fmt.Sprintf("connection error %v", http2.ErrCode(ce))
	case err != nil:
		return "error " + err.Error()
	}
	mh, ok := f.(*http2.MetaHeadersFrame)
	if !ok {
		return fmt.Sprintf("frame %v", f.Header().Type)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "stream %d end %v truncated %v:", mh.StreamID, mh.StreamEnded(), mh.Truncated)
	for _, hf := range mh.Fields {
		fmt.Fprintf(&b, " %q=%q", hf.Name, hf.Value)
	}
	return b.String()
}

// TestReaderReadsAsTheFramer writes random header blocks, split over
// CONTINUATION frames, with fields valid and not, lists over the limit,
// pseudo-fields in and out of place, table size updates, padding and
// priorities, and now and then bytes that are no valid block at all,
// and checks that the Reader reads each exactly as x/net's framer with
// ReadMetaHeaders does. One encoder writes all of a connection's blocks,
// so that they refer to the fields of earlier ones; values of the same
// length that differ in a byte try the strings the decoder remembers.
func TestReaderReadsAsTheFramer(t *testing.T) {
	names := []string{":method", ":path", ":status", ":bogus", "content-type", "x-a", "X-Upper", "trailer", "bad name", "", "user-agent"}
	values := []string{"", "GET", "/", "200", "application/grpc", "a, b, c", "bad\x00value", " spaced",
		strings.Repeat("v", 700), "/svc/Call1", "/svc/Call2", "{|}~^", "\x7f\x7e", strings.Repeat("w", 130)}
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var wire, hb bytes.Buffer
		w := http2.NewFramer(&wire, nil)
		w.AllowIllegalWrites = true
		enc := hpack.NewEncoder(&hb)
		blocks := 1 + rng.IntN(8)
		for i := range blocks {
			hb.Reset()
			n := rng.IntN(10)
			if n > 0 && rng.IntN(5) == 0 {
				// Set before a block with fields only: x/net's encoder
				// would signal two sizes before the next, the smallest
				// first, and x/net's decoder refuses a second update into
				// a table not empty, which the Reader, as RFC 7541 4.2
				// says, takes (TestTableSizeUpdates).
				enc.SetMaxDynamicTableSize(uint32(rng.IntN(DefaultTable + 1)))
			}
			for range n {
				enc.WriteField(hpack.HeaderField{Name: names[rng.IntN(len(names))], Value: values[rng.IntN(len(values))], Sensitive: rng.IntN(6) == 0})
			}
			block := hb.Bytes()
			if rng.IntN(10) == 0 {
				// Bytes that are no block, or a block cut short.
				junk := make([]byte, 1+rng.IntN(12))
				for j := range junk {
					junk[j] = byte(rng.Uint32())
				}
				block = append(block[:rng.IntN(len(block)+1)], junk...)
			}
			id := uint32(2*i + 1)
			parts := 1 + rng.IntN(3)
			size := len(block)/parts + 1
			first := block[:min(size, len(block))]
			rest := block[len(first):]
			hp := http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: rng.IntN(2) == 0, EndHeaders: len(rest) == 0}
			if rng.IntN(4) == 0 {
				hp.PadLength = uint8(rng.IntN(20))
			}
			if rng.IntN(4) == 0 {
				hp.Priority = http2.PriorityParam{StreamDep: uint32(rng.IntN(9)), Exclusive: rng.IntN(2) == 0, Weight: uint8(rng.Uint32())}
			}
			w.WriteHeaders(hp)
			for len(rest) > 0 {
				frag := rest[:min(size, len(rest))]
				rest = rest[len(frag):]
				w.WriteContinuation(id, len(rest) == 0, frag)
			}
			if rng.IntN(3) == 0 {
				w.WritePing(false, [8]byte{1})
			}
		}
		limit := []uint32{0, 100, 400, 2000}[rng.IntN(4)]
		data := wire.Bytes()

		ref := http2.NewFramer(nil, bytes.NewReader(data))
		ref.ReadMetaHeaders = hpack.NewDecoder(DefaultTable, nil)
		ref.MaxHeaderListSize = limit
		src := bytes.NewReader(data)
		fr := http2.NewFramer(nil, src)
		fr.MaxHeaderListSize = limit
		r := NewReader(fr, src)
		for step := 0; ; step++ {
			want := outcome(ref.ReadFrame())
			got := outcome(r.ReadFrame())
			if got != want {
				t.Fatalf("seed %d frame %d (limit %d): read %s, want %s", seed, step, limit, got, want)
			}
			if strings.HasPrefix(want, "error") || strings.HasPrefix(want, "connection error") {
				break
			}
		}
	}
}
