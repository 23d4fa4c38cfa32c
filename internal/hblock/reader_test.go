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
// CONTINUATION frames, with fields valid and not, lists over the limit
// and pseudo-fields in and out of place, and checks that the Reader
// reads each exactly as x/net's framer with ReadMetaHeaders does.
func TestReaderReadsAsTheFramer(t *testing.T) {
	names := []string{":method", ":path", ":status", ":bogus", "content-type", "x-a", "X-Upper", "trailer", "bad name", ""}
	values := []string{"", "GET", "/", "200", "application/grpc", "a, b, c", "bad\x00value", " spaced", strings.Repeat("v", 700)}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var wire bytes.Buffer
		w := http2.NewFramer(&wire, nil)
		enc := hpack.NewEncoder(new(bytes.Buffer))
		blocks := 1 + rng.IntN(6)
		for i := range blocks {
			var hb bytes.Buffer
			enc = hpack.NewEncoder(&hb)
			n := rng.IntN(10)
			for range n {
				enc.WriteField(hpack.HeaderField{Name: names[rng.IntN(len(names))], Value: values[rng.IntN(len(values))]})
			}
			block := hb.Bytes()
			id := uint32(2*i + 1)
			parts := 1 + rng.IntN(3)
			size := len(block)/parts + 1
			first := block[:min(size, len(block))]
			rest := block[len(first):]
			w.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: rng.IntN(2) == 0, EndHeaders: len(rest) == 0})
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
		fr := http2.NewFramer(nil, bytes.NewReader(data))
		fr.MaxHeaderListSize = limit
		r := NewReader(fr)
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
