package balance

import (
	"strings"
	"testing"

	"relay/internal/backend"
)

func TestWeightedSequence(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		want    string
	}{
		{name: "nginx example 5,1,1", weights: []int{5, 1, 1}, want: "a a b a c a a a a b a c a a"},
		{name: "3,1,1", weights: []int{3, 1, 1}, want: "a b a c a"},
		{name: "equal", weights: []int{2, 2, 2}, want: "a b c a b c"},
		{name: "single", weights: []int{7}, want: "a a a"},
		{name: "heavy last", weights: []int{1, 2}, want: "b a b b a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewWeightedRoundRobin(pool(t, tt.weights...), Options{})
			want := strings.Fields(tt.want)
			got := make([]string, len(want))
			for i := range got {
				got[i] = short(p.Pick(0, Filter{}))
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("picks = %v, want %v", got, want)
			}
		})
	}
}

// checkWindows fails unless every run of sum(weights) consecutive picks,
// over several cycles, holds each backend exactly its weight times.
func checkWindows(t *testing.T, p Picker, bs []*backend.Backend) {
	t.Helper()
	window := 0
	for _, b := range bs {
		window += b.Weight
	}
	picks := make([]*backend.Backend, 3*window)
	for i := range picks {
		picks[i] = p.Pick(0, Filter{})
	}
	in := make(map[*backend.Backend]int)
	for i, b := range picks {
		in[b]++
		if i >= window {
			in[picks[i-window]]--
		}
		if i < window-1 {
			continue
		}
		for _, b := range bs {
			if in[b] != b.Weight {
				t.Fatalf("window ending at pick %d holds %s %d times, want %d", i, short(b), in[b], b.Weight)
			}
		}
	}
}

func TestWeightedWindows(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
	}{
		{name: "3,1,1", weights: []int{3, 1, 1}},
		{name: "5,1,1", weights: []int{5, 1, 1}},
		{name: "1,1,1", weights: []int{1, 1, 1}},
		{name: "7,3,2,1", weights: []int{7, 3, 2, 1}},
		{name: "100,1", weights: []int{100, 1}},
		{name: "common factor 6,4,2", weights: []int{6, 4, 2}},
		{name: "coprime 13,8,5,3,2,1,1", weights: []int{13, 8, 5, 3, 2, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := pool(t, tt.weights...)
			checkWindows(t, NewWeightedRoundRobin(bs, Options{}), bs)
		})
	}
}

// The table is a recording of the nginx loop; they must agree pick for pick.
func TestWeightedTableMatchesLoop(t *testing.T) {
	for _, weights := range [][]int{{5, 1, 1}, {7, 3, 2, 1}, {9, 6, 3}, {1, 100, 1, 50}} {
		bs := pool(t, weights...)
		table := newSmooth(bs).table()
		loop := newSmooth(bs)
		for i := range 500 {
			if a, b := table.Pick(0, Filter{}), loop.Pick(0, Filter{}); a != b {
				t.Fatalf("weights %v pick %d: table %s, loop %s", weights, i, short(a), short(b))
			}
		}
	}
}

// A cycle too long to precompute falls back to the loop and keeps every
// guarantee.
func TestWeightedLongCycle(t *testing.T) {
	bs := pool(t, maxCycle+1, 2, 1)
	p := NewWeightedRoundRobin(bs, Options{})
	if _, ok := p.(*smooth); !ok {
		t.Fatalf("picker for a cycle of %d is %T, want the loop", maxCycle+4, p)
	}
	checkWindows(t, p, bs)
}

// A backend that was out of rotation comes back with no accumulated credit:
// from the first pick of the rebuilt picker the windows match the weights.
func TestWeightedNoBurstOnReturn(t *testing.T) {
	bs := pool(t, 1, 1, 5)
	without := NewWeightedRoundRobin(bs[:2], Options{})
	for range 1001 {
		without.Pick(0, Filter{})
	}
	with := NewWeightedRoundRobin(bs, Options{})
	got := counts(with, 7, noKey)
	for _, b := range bs {
		if got[b] != b.Weight {
			t.Errorf("first 7 picks after return gave %s %d, want %d", short(b), got[b], b.Weight)
		}
	}
	// It starts exactly where a fresh cycle starts.
	with = NewWeightedRoundRobin(bs, Options{})
	var seq []string
	for range 7 {
		seq = append(seq, short(with.Pick(0, Filter{})))
	}
	if got := strings.Join(seq, " "); got != "c c a c b c c" {
		t.Errorf("first cycle after return = %s, want c c a c b c c", got)
	}
}
