package balance

import (
	"testing"

	"relay/internal/backend"
)

// script returns a Rand that replays values in order and fails the test if
// asked for a value outside [0, n).
func script(t *testing.T, values ...int) func(int) int {
	i := 0
	return func(n int) int {
		t.Helper()
		v := values[i%len(values)]
		i++
		if v < 0 || v >= n {
			t.Fatalf("scripted value %d is outside Rand(%d)", v, n)
		}
		return v
	}
}

func TestP2CPrefersLowerInFlight(t *testing.T) {
	tests := []struct {
		name     string
		weights  []int
		inFlight []int
		draws    []int // first index, then second drawn from the rest
		want     string
	}{
		{name: "first lower", weights: []int{1, 1, 1}, inFlight: []int{1, 5, 0}, draws: []int{0, 0}, want: "a"},
		{name: "second lower", weights: []int{1, 1, 1}, inFlight: []int{1, 5, 0}, draws: []int{1, 1}, want: "c"},
		{name: "second skips first", weights: []int{1, 1, 1}, inFlight: []int{4, 0, 2}, draws: []int{1, 1}, want: "b"},
		{name: "tie keeps first", weights: []int{1, 1, 1}, inFlight: []int{2, 2, 2}, draws: []int{2, 0}, want: "c"},
		{name: "weight scales load", weights: []int{3, 1}, inFlight: []int{2, 1}, draws: []int{1, 0}, want: "a"},
		{name: "single", weights: []int{1}, inFlight: []int{7}, draws: []int{0}, want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := pool(t, tt.weights...)
			load(bs, tt.inFlight...)
			if got := short(NewP2C(bs, Options{Rand: script(t, tt.draws...)}).Pick(0, Filter{})); got != tt.want {
				t.Errorf("picked %s, want %s", got, tt.want)
			}
		})
	}
}

// Whatever the first draw, the second names a different backend, and every
// other backend can be it. The first drawn is made the busiest, so the pick
// shows the second choice.
func TestP2CDistinctChoices(t *testing.T) {
	for n := 2; n <= 5; n++ {
		bs := equalPool(t, n)
		for first := range n {
			inFlight := make([]int, n)
			inFlight[first] = 1
			load(bs, inFlight...)
			second := make(map[*backend.Backend]bool)
			for draw := range n - 1 {
				got := NewP2C(bs, Options{Rand: script(t, first, draw)}).Pick(0, Filter{})
				if got == bs[first] {
					t.Fatalf("n=%d: draws %d, %d chose %s twice", n, first, draw, short(got))
				}
				second[got] = true
			}
			if len(second) != n-1 {
				t.Errorf("n=%d, first %d: second choice reached %d backends, want %d", n, first, len(second), n-1)
			}
		}
	}
}

// With one idle backend among busy ones, p2c takes it whenever it is drawn:
// two of three picks for a pool of three.
func TestP2CShare(t *testing.T) {
	bs := equalPool(t, 3)
	load(bs, 0, 4, 4)
	got := counts(NewP2C(bs, Options{Rand: seeded(6)}), 30000, noKey)
	if !within(float64(got[bs[0]]), 20000, 0.03) {
		t.Errorf("idle backend got %d of 30000 picks, want 20000 ±3%%", got[bs[0]])
	}
}
