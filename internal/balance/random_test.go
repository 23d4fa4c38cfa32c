package balance

import (
	"testing"

	"relay/internal/backend"
)

func TestRandomUniform(t *testing.T) {
	tests := []struct {
		name  string
		n     int
		picks int
	}{
		{name: "two", n: 2, picks: 20000},
		{name: "ten", n: 10, picks: 100000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := equalPool(t, tt.n)
			got := counts(NewRandom(bs, Options{Rand: seeded(1)}), tt.picks, noKey)
			want := float64(tt.picks) / float64(tt.n)
			for _, b := range bs {
				if !within(float64(got[b]), want, 0.05) {
					t.Errorf("%s got %d picks, want %.0f ±5%%", short(b), got[b], want)
				}
			}
		})
	}
}

// The picker only knows the backends it was built with, so a backend out of
// rotation is never chosen, and it asks Rand for exactly that many.
func TestRandomOnlyFromSlice(t *testing.T) {
	all := equalPool(t, 5)
	live := []*backend.Backend{all[0], all[3], all[4]}
	rnd := seeded(2)
	p := NewRandom(live, Options{Rand: func(n int) int {
		if n != len(live) {
			t.Fatalf("Rand(%d) called, want Rand(%d)", n, len(live))
		}
		return rnd(n)
	}})
	got := counts(p, 3000, noKey)
	for b, c := range got {
		if b != all[0] && b != all[3] && b != all[4] {
			t.Fatalf("picked %s (%d times), which is not in the slice", short(b), c)
		}
	}
	if len(got) != len(live) {
		t.Errorf("picked %d distinct backends, want all %d", len(got), len(live))
	}
}
