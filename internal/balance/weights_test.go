package balance

import (
	"slices"
	"testing"
)

// TestIgnoresWeightsAsItSays: IgnoresWeights, which relay's warnings
// read, matches what each algorithm does. Picks hold their backend (its
// request stays in flight), so the load-reading algorithms see the load
// they balance; the backend of weight 4 then gets about four fifths of
// the picks from an algorithm that honours weights and half from one that
// ignores them.
func TestIgnoresWeightsAsItSays(t *testing.T) {
	const picks = 2000
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			a, err := Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			bs := pool(t, 1, 4)
			p := a.New(bs, Options{Rand: seeded(7)})
			heavy := 0
			for i := range picks {
				b := p.Pick(uint64(i)*0x9e3779b97f4a7c15, Filter{})
				if b == nil {
					t.Fatal("no backend picked")
				}
				b.Acquire()
				if b == bs[1] {
					heavy++
				}
			}
			share := float64(heavy) / picks
			switch {
			case a.IgnoresWeights && (share < 0.4 || share > 0.6):
				t.Errorf("said to ignore weights, but the backend of weight 4 got %.2f of the picks, want about 0.5", share)
			case !a.IgnoresWeights && (share < 0.7 || share > 0.9):
				t.Errorf("said to honour weights, but the backend of weight 4 got %.2f of the picks, want about 0.8", share)
			}
		})
	}
	if got, want := IgnoringWeights(), []string{"random", "round-robin", "roundrobin"}; !slices.Equal(got, want) {
		t.Errorf("IgnoringWeights() = %v, want %v", got, want)
	}
}
