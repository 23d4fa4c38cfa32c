package trace

import (
	"encoding/binary"
	"math"
	"testing"
)

func TestSamplerRatio(t *testing.T) {
	const n = 100_000
	tests := []struct {
		name     string
		ratio    float64
		min, max int
	}{
		{name: "never", ratio: 0, min: 0, max: 0},
		{name: "always", ratio: 1, min: n, max: n},
		{name: "one percent", ratio: 0.01, min: 700, max: 1300},
		{name: "half", ratio: 0.5, min: 48_500, max: 51_500},
		{name: "above one", ratio: 2, min: n, max: n},
		{name: "negative", ratio: -1, min: 0, max: 0},
		{name: "NaN", ratio: math.NaN(), min: 0, max: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Sampler{Ratio: tt.ratio}
			got := 0
			for range n {
				if s.Sample(Parent{}, NewTraceID()) {
					got++
				}
			}
			if got < tt.min || got > tt.max {
				t.Fatalf("%d of %d sampled, want %d to %d", got, n, tt.min, tt.max)
			}
		})
	}
}

func TestSamplerParent(t *testing.T) {
	sampled := Parent{Trace: TraceID{1}, Span: SpanID{1}, Flags: FlagSampled, Valid: true}
	unsampled := Parent{Trace: TraceID{1}, Span: SpanID{1}, Valid: true}
	invalidButFlagged := Parent{Flags: FlagSampled} // Valid false: its flags mean nothing
	tests := []struct {
		name    string
		sampler Sampler
		parent  Parent
		want    bool
	}{
		{name: "honoured sampled parent beats ratio 0", sampler: Sampler{Ratio: 0, HonourParent: true}, parent: sampled, want: true},
		{name: "honoured unsampled parent beats ratio 1", sampler: Sampler{Ratio: 1, HonourParent: true}, parent: unsampled, want: false},
		{name: "ignored sampled parent, ratio 0", sampler: Sampler{Ratio: 0}, parent: sampled, want: false},
		{name: "ignored unsampled parent, ratio 1", sampler: Sampler{Ratio: 1}, parent: unsampled, want: true},
		{name: "invalid parent, ratio decides", sampler: Sampler{Ratio: 0, HonourParent: true}, parent: invalidButFlagged, want: false},
		{name: "no parent, ratio 1", sampler: Sampler{Ratio: 1, HonourParent: true}, want: true},
		{name: "zero sampler", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.sampler.Sample(tt.parent, NewTraceID()); got != tt.want {
				t.Fatalf("Sample = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSamplerConsistent: the decision is the trace id's, whichever relay
// process or instance makes it and whatever the parent's span, and a trace
// sampled at a ratio stays sampled at every larger one.
func TestSamplerConsistent(t *testing.T) {
	ratios := []float64{0.001, 0.01, 0.1, 0.5, 0.9}
	for range 10_000 {
		id := NewTraceID()
		prev := false
		for _, r := range ratios {
			a := Sampler{Ratio: r}.Sample(Parent{}, id)
			b := Sampler{Ratio: r, HonourParent: true}.Sample(Parent{}, id)
			c := Sampler{Ratio: r}.Sample(Parent{Trace: id, Span: NewSpanID(), Flags: FlagSampled, Valid: true}, id)
			if a != b || a != c {
				t.Fatalf("trace %s at %v: decisions %v %v %v differ", id, r, a, b, c)
			}
			if prev && !a {
				t.Fatalf("trace %s sampled below %v but not at it", id, r)
			}
			prev = a
		}
	}
}

// TestSamplerBound checks the threshold against OpenTelemetry's
// TraceIDRatioBased on ids at its edge: the last 8 bytes, shifted right by
// one, are compared with ratio·2^63.
func TestSamplerBound(t *testing.T) {
	at := func(last uint64) TraceID {
		var id TraceID
		id[0] = 1
		binary.BigEndian.PutUint64(id[8:], last)
		return id
	}
	bound := uint64(0.25 * (1 << 63)) // 2^61
	tests := []struct {
		name string
		id   TraceID
		want bool
	}{
		{name: "zero low bytes", id: at(0), want: true},
		{name: "just below", id: at((bound - 1) << 1), want: true},
		{name: "low bit ignored", id: at((bound-1)<<1 | 1), want: true},
		{name: "at the bound", id: at(bound << 1), want: false},
		{name: "high bytes ignored", id: func() TraceID { id := at(0); id[0] = 0xff; return id }(), want: true},
		{name: "top", id: at(math.MaxUint64), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Sampler{Ratio: 0.25}).Sample(Parent{}, tt.id); got != tt.want {
				t.Fatalf("Sample(%s) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}

func TestNewIDs(t *testing.T) {
	seenT := make(map[TraceID]bool)
	seenS := make(map[SpanID]bool)
	for range 10_000 {
		tr, sp := NewTraceID(), NewSpanID()
		if tr.IsZero() || sp.IsZero() {
			t.Fatal("zero id")
		}
		if seenT[tr] || seenS[sp] {
			t.Fatalf("id repeated: %s %s", tr, sp)
		}
		seenT[tr], seenS[sp] = true, true
	}
}

func BenchmarkNewTraceID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = NewTraceID()
	}
}

func BenchmarkNewTraceIDParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = NewTraceID()
		}
	})
}

func BenchmarkSample(b *testing.B) {
	s := Sampler{Ratio: 0.01, HonourParent: true}
	id := NewTraceID()
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Sample(Parent{}, id)
	}
}
