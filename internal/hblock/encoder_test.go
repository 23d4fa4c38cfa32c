package hblock

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/http2/hpack"
)

// decoded decodes block with d, failing the test on error.
func decoded(t *testing.T, d *hpack.Decoder, block []byte) []hpack.HeaderField {
	t.Helper()
	fs, err := d.DecodeFull(block)
	if err != nil {
		t.Fatalf("decoding %x: %v", block, err)
	}
	return fs
}

type field struct {
	name, value string
	never       bool
}

// encode encodes fields as one block, each name and value given as a view
// of a buffer that is overwritten once the block is done, as relay's
// fields are views of buffers it reuses.
func encode(e *Encoder, fields []field) []byte {
	var bufs [][]byte
	view := func(s string) string {
		b := []byte(s)
		bufs = append(bufs, b)
		return unsafe.String(unsafe.SliceData(b), len(b))
	}
	// Blocks of an odd number of fields go as trailer sections, which
	// the encoder remembers apart from heads.
	if len(fields)%2 == 1 {
		e.BeginTrailers()
	} else {
		e.Begin()
	}
	for _, f := range fields {
		if f.never {
			e.Never(view(f.name), view(f.value))
		} else {
			e.Field(view(f.name), view(f.value))
		}
	}
	for _, b := range bufs {
		for i := range b {
			b[i] = '#'
		}
	}
	return append([]byte(nil), e.Block()...)
}

func same(t *testing.T, round int, got []hpack.HeaderField, want []field) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("round %d: decoded %d fields, want %d: %v", round, len(got), len(want), got)
	}
	for i := range want {
		if got[i].Name != want[i].name || got[i].Value != want[i].value || got[i].Sensitive != want[i].never {
			t.Fatalf("round %d field %d: decoded %q: %q (never indexed %v), want %q: %q (%v)",
				round, i, got[i].Name, got[i].Value, got[i].Sensitive, want[i].name, want[i].value, want[i].never)
		}
	}
}

// TestRepeatedBlocksAreIndexes checks the common case: a gRPC request's
// fields, sent again, take a byte each.
func TestRepeatedBlocksAreIndexes(t *testing.T) {
	fields := []field{
		{":method", "POST", false}, {":scheme", "http", false}, {":authority", "backend:9101", false},
		{":path", "/grpc.testing.TestService/UnaryCall", false}, {"content-type", "application/grpc", false},
		{"user-agent", "grpc-go/1.0", false}, {"x-forwarded-for", "127.0.0.1", false},
		{"x-request-id", "3f1c2a", true}, {"te", "trailers", false},
	}
	e := NewEncoder()
	d := hpack.NewDecoder(DefaultTable, nil)
	first := encode(e, fields)
	same(t, 0, decoded(t, d, first), fields)
	fields[7].value = "77aa01"
	again := encode(e, fields)
	same(t, 1, decoded(t, d, again), fields)
	// Eight indexes and the never-indexed request id, name and all.
	if want := 8 + 2 + len("x-request-id") + 1 + len("77aa01"); len(again) > want {
		t.Fatalf("repeated block takes %d bytes (first %d), want at most %d", len(again), len(first), want)
	}
}

// TestEncoderProperty encodes random blocks, from a small vocabulary so
// that fields repeat, in shifting places and with table size changes, and
// decodes each with x/net's decoder: every field must come back as it
// was given.
func TestEncoderProperty(t *testing.T) {
	names := []string{":method", ":path", ":authority", "content-type", "x-a", "x-b", "user-agent", "accept-encoding", "grpc-timeout"}
	values := []string{"", "GET", "POST", "/", "/a/b", "application/grpc", "gzip, deflate", "v1", "v2",
		strings.Repeat("long", 300), strings.Repeat("x", 1500)}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		e := NewEncoder()
		d := hpack.NewDecoder(DefaultTable, nil)
		for round := range 60 {
			if rng.IntN(8) == 0 {
				// The peer changes its SETTINGS_HEADER_TABLE_SIZE, once
				// or twice between blocks; its decoder takes size
				// updates up to the last limit.
				for range 1 + rng.IntN(2) {
					limit := []uint32{0, 64, 200, 1024, 4096, 8192}[rng.IntN(6)]
					e.SetLimit(limit)
					d.SetAllowedMaxDynamicTableSize(limit)
				}
			}
			n := rng.IntN(12)
			fields := make([]field, n)
			for i := range fields {
				fields[i] = field{names[rng.IntN(len(names))], values[rng.IntN(len(values))], rng.IntN(8) == 0}
			}
			block := encode(e, fields)
			got, err := d.DecodeFull(block)
			if err != nil {
				t.Fatalf("seed %d round %d: decoding %v: %v", seed, round, fields, err)
			}
			same(t, round, got, fields)
			if e.size > e.max {
				t.Fatalf("seed %d round %d: table size %d over its maximum %d", seed, round, e.size, e.max)
			}
		}
	}
}

// TestIntegers checks HPACK's integer encoding at prefix boundaries
// against the decoder.
func TestIntegers(t *testing.T) {
	for _, n := range []int{0, 1, 30, 31, 126, 127, 128, 255, 16383, 16384, 70000} {
		e := NewEncoder()
		d := hpack.NewDecoder(DefaultTable, nil)
		v := strings.Repeat("a", n)
		e.Begin()
		e.Never("x-len", v)
		got := decoded(t, d, e.Block())
		if len(got) != 1 || got[0].Value != v {
			t.Fatal(fmt.Sprintf("length %d: decoded %d fields", n, len(got)))
		}
	}
}
