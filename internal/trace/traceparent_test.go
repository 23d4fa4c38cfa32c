package trace

import (
	"bytes"
	"strings"
	"testing"
)

const (
	goodTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	goodSpan  = "00f067aa0ba902b7"
)

func TestParseTraceparent(t *testing.T) {
	want := Parent{
		Trace: TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		Span:  SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		Valid: true,
	}
	with := func(flags byte) Parent { p := want; p.Flags = flags; return p }
	tests := []struct {
		name string
		in   string
		want Parent
	}{
		{name: "sampled", in: "00-" + goodTrace + "-" + goodSpan + "-01", want: with(0x01)},
		{name: "not sampled", in: "00-" + goodTrace + "-" + goodSpan + "-00", want: with(0x00)},
		{name: "random flag kept", in: "00-" + goodTrace + "-" + goodSpan + "-03", want: with(0x03)},
		{name: "unknown flags kept on version 00", in: "00-" + goodTrace + "-" + goodSpan + "-ff", want: with(0xff)},
		{name: "version 01 alone", in: "01-" + goodTrace + "-" + goodSpan + "-01", want: with(0x01)},
		{name: "version 01 with more fields", in: "01-" + goodTrace + "-" + goodSpan + "-01-what-comes-next", want: with(0x01)},
		{name: "version 01 keeps only the sampled bit", in: "01-" + goodTrace + "-" + goodSpan + "-03", want: with(0x01)},
		{name: "version fe", in: "fe-" + goodTrace + "-" + goodSpan + "-00-x", want: with(0x00)},

		{name: "empty", in: ""},
		{name: "short by one", in: "00-" + goodTrace + "-" + goodSpan + "-0"},
		{name: "trailing garbage on 00", in: "00-" + goodTrace + "-" + goodSpan + "-01x"},
		{name: "trailing dash on 00", in: "00-" + goodTrace + "-" + goodSpan + "-01-"},
		{name: "version 01 followed by not a dash", in: "01-" + goodTrace + "-" + goodSpan + "-01x"},
		{name: "version ff", in: "ff-" + goodTrace + "-" + goodSpan + "-01"},
		{name: "version not hex", in: "0g-" + goodTrace + "-" + goodSpan + "-01"},
		{name: "version upper case", in: "0A-" + goodTrace + "-" + goodSpan + "-01"},
		{name: "first dash missing", in: "00_" + goodTrace + "-" + goodSpan + "-01"},
		{name: "second dash missing", in: "00-" + goodTrace + "_" + goodSpan + "-01"},
		{name: "third dash missing", in: "00-" + goodTrace + "-" + goodSpan + "_01"},
		{name: "dashes shifted", in: "00--" + goodTrace[:31] + "-" + goodSpan + "-01"},
		{name: "upper-case trace id", in: "00-" + strings.ToUpper(goodTrace) + "-" + goodSpan + "-01"},
		{name: "upper-case span id", in: "00-" + goodTrace + "-00F067AA0BA902B7-01"},
		{name: "upper-case flags", in: "00-" + goodTrace + "-" + goodSpan + "-0A"},
		{name: "non-hex trace id", in: "00-" + goodTrace[:31] + "z-" + goodSpan + "-01"},
		{name: "non-hex span id", in: "00-" + goodTrace + "-" + goodSpan[:15] + "z-01"},
		{name: "non-hex flags", in: "00-" + goodTrace + "-" + goodSpan + "-0x"},
		{name: "zero trace id", in: "00-" + strings.Repeat("0", 32) + "-" + goodSpan + "-01"},
		{name: "zero span id", in: "00-" + goodTrace + "-" + strings.Repeat("0", 16) + "-01"},
		{name: "zero trace id on version 01", in: "01-" + strings.Repeat("0", 32) + "-" + goodSpan + "-01"},
		{name: "spaces around", in: " 00-" + goodTrace + "-" + goodSpan + "-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseTraceparent([]byte(tt.in)); got != tt.want {
				t.Errorf("ParseTraceparent(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestAppendTraceparent(t *testing.T) {
	tests := []struct {
		name  string
		trace TraceID
		span  SpanID
		flags byte
		want  string
	}{
		{name: "sampled", trace: TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
			span: SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}, flags: 1,
			want: "00-" + goodTrace + "-" + goodSpan + "-01"},
		{name: "all ones", trace: TraceID{0: 0xff, 15: 0xff}, span: SpanID{7: 0xff}, flags: 0xff,
			want: "00-ff0000000000000000000000000000ff-00000000000000ff-ff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendTraceparent([]byte("x"), tt.trace, tt.span, tt.flags)
			if string(got) != "x"+tt.want {
				t.Fatalf("got %q, want %q", got, "x"+tt.want)
			}
			p := ParseTraceparent(got[1:])
			if !p.Valid || p.Trace != tt.trace || p.Span != tt.span || p.Flags != tt.flags {
				t.Fatalf("parsed back as %+v", p)
			}
		})
	}
}

func TestChildFlags(t *testing.T) {
	tests := []struct {
		name    string
		parent  Parent
		sampled bool
		want    byte
	}{
		{name: "relay's own trace, sampled", sampled: true, want: FlagSampled | FlagRandom},
		{name: "relay's own trace, not sampled", want: FlagRandom},
		{name: "parent without random", parent: Parent{Valid: true, Flags: FlagSampled}, sampled: true, want: FlagSampled},
		{name: "parent random kept", parent: Parent{Valid: true, Flags: FlagRandom}, want: FlagRandom},
		{name: "unknown bits cleared", parent: Parent{Valid: true, Flags: 0xfc}, sampled: true, want: FlagSampled},
		{name: "relay's decision over the parent's", parent: Parent{Valid: true, Flags: FlagSampled}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.parent.ChildFlags(tt.sampled); got != tt.want {
				t.Fatalf("ChildFlags = %#x, want %#x", got, tt.want)
			}
		})
	}
}

// TestUnsampledPathAllocs holds relay's work for a request that is not
// sampled, and the parse and format steps of one that is, to no
// allocation: parse the client's field, make the ids, decide, write the
// field for the backend.
func TestUnsampledPathAllocs(t *testing.T) {
	in := []byte("00-" + goodTrace + "-" + goodSpan + "-00")
	bad := []byte("00-" + goodTrace + "-" + goodSpan + "-0X")
	buf := make([]byte, 0, 64)
	s := Sampler{Ratio: 0.01, HonourParent: true}
	tests := []struct {
		name string
		fn   func()
	}{
		{name: "parse", fn: func() { _ = ParseTraceparent(in) }},
		{name: "parse malformed", fn: func() { _ = ParseTraceparent(bad) }},
		{name: "append", fn: func() { buf = AppendTraceparent(buf[:0], TraceID{1}, SpanID{1}, 1) }},
		{name: "ids", fn: func() { _, _ = NewTraceID(), NewSpanID() }},
		{name: "sample", fn: func() { _ = s.Sample(Parent{}, TraceID{1}) }},
		{name: "whole request", fn: func() {
			p := ParseTraceparent(in)
			tr := p.Trace
			if !p.Valid {
				tr = NewTraceID()
			}
			sampled := s.Sample(p, tr)
			buf = AppendTraceparent(buf[:0], tr, NewSpanID(), p.ChildFlags(sampled))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := testing.AllocsPerRun(1000, tt.fn); n != 0 {
				t.Fatalf("%v allocations per run, want 0", n)
			}
		})
	}
}

func FuzzParseTraceparent(f *testing.F) {
	f.Add([]byte("00-" + goodTrace + "-" + goodSpan + "-01"))
	f.Add([]byte("01-" + goodTrace + "-" + goodSpan + "-01-x"))
	f.Fuzz(func(t *testing.T, v []byte) {
		p := ParseTraceparent(v)
		if !p.Valid {
			if p != (Parent{}) {
				t.Fatalf("invalid but not zero: %+v", p)
			}
			return
		}
		if p.Trace.IsZero() || p.Span.IsZero() {
			t.Fatalf("valid with a zero id: %q", v)
		}
		out := AppendTraceparent(nil, p.Trace, p.Span, p.Flags)
		if v[0] == '0' && v[1] == '0' && !bytes.Equal(out, v) {
			t.Fatalf("version 00 %q written back as %q", v, out)
		}
		if !bytes.Equal(out[3:53], v[3:53]) {
			t.Fatalf("ids of %q written back as %q", v, out)
		}
	})
}

func BenchmarkParseTraceparent(b *testing.B) {
	in := []byte("00-" + goodTrace + "-" + goodSpan + "-01")
	b.ReportAllocs()
	for b.Loop() {
		_ = ParseTraceparent(in)
	}
}

func BenchmarkAppendTraceparent(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendTraceparent(buf[:0], TraceID{1}, SpanID{1}, 1)
	}
}
