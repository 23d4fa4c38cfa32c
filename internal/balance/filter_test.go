package balance

import (
	"fmt"
	"testing"
	"time"

	"relay/internal/backend"
)

// TestFilterRefusals checks, for every algorithm, that a pick never returns
// a backend the filter refuses (unavailable, or tried by this request), and
// returns nil when it refuses them all.
func TestFilterRefusals(t *testing.T) {
	for _, alg := range algorithms {
		for _, n := range []int{1, 2, 5, 300} {
			t.Run(fmt.Sprintf("%s/n=%d", alg.name, n), func(t *testing.T) {
				bs := equalPool(t, n)
				p := alg.build(bs, Options{Rand: seeded(uint64(n))})
				// Every other backend is out, each for another reason.
				var f Filter
				for i, b := range bs {
					switch i % 6 {
					case 1:
						b.SetHealthy(false)
					case 3:
						b.Eject(time.Now().Add(time.Hour))
					case 5:
						b.SetDraining(true)
					}
				}
				if n > 2 {
					f.Add(bs[0]) // tried already
				}
				for k := range 2000 {
					b := p.Pick(mixKey(k), f)
					if b == nil {
						t.Fatalf("n=%d: pick %d found nothing although backends are allowed", n, k)
					}
					if !f.Allows(b) {
						t.Fatalf("n=%d: picked %s, which the filter refuses (%q)", n, short(b), b.State().Reason())
					}
				}
				for _, b := range bs {
					b.SetDisabled(true)
				}
				if b := p.Pick(mixKey(1), f); b != nil {
					t.Fatalf("n=%d: picked %s with every backend disabled", n, short(b))
				}
			})
		}
	}
}

// TestRoundRobinSkipsFairly: a backend that is out has its share spread
// evenly over the others, not given to its neighbour.
func TestRoundRobinSkipsFairly(t *testing.T) {
	bs := equalPool(t, 4)
	bs[1].SetHealthy(false)
	got := counts(NewRoundRobin(bs, Options{}), 3000, noKey)
	for _, i := range []int{0, 2, 3} {
		if got[bs[i]] != 1000 {
			t.Errorf("with b out, %s got %d of 3000 picks, want 1000 (a, c and d alike)", short(bs[i]), got[bs[i]])
		}
	}
}

// TestWeightedSkipsFairly: with the weight-1 b out of 5,1,1, a and c keep
// their 5:1 proportion, in both the table and the loop forms.
func TestWeightedSkipsFairly(t *testing.T) {
	for _, form := range []struct {
		name string
		p    func(bs []*backend.Backend) Picker
	}{
		{"table", func(bs []*backend.Backend) Picker { return NewWeightedRoundRobin(bs, Options{}) }},
		{"loop", func(bs []*backend.Backend) Picker { return newSmooth(bs) }},
	} {
		t.Run(form.name, func(t *testing.T) {
			bs := pool(t, 5, 1, 1)
			bs[1].SetHealthy(false)
			got := counts(form.p(bs), 6000, noKey)
			if got[bs[0]] != 5000 || got[bs[2]] != 1000 || got[bs[1]] != 0 {
				t.Errorf("a %d, b %d, c %d of 6000; want 5000, 0, 1000", got[bs[0]], got[bs[1]], got[bs[2]])
			}
		})
	}
}

// TestIPHashFallbackSpreads is the Maglev-style fallback: when one of ten
// backends may not be picked (out of rotation, or tried already by a
// retry), exactly its keys move, they spread over all nine others, each key
// always to the same one, and they come back when it does.
func TestIPHashFallbackSpreads(t *testing.T) {
	const keys = 20000
	for _, how := range []string{"unavailable", "tried"} {
		t.Run(how, func(t *testing.T) {
			bs := equalPool(t, 10)
			p := NewIPHash(bs, Options{})
			before := make([]*backend.Backend, keys)
			for k := range keys {
				before[k] = p.Pick(mixKey(k), Filter{})
			}
			out := bs[3]
			var f Filter
			if how == "unavailable" {
				out.SetHealthy(false)
			} else {
				f.Add(out)
			}
			moved := map[*backend.Backend]int{}
			owned := 0
			for k := range keys {
				got := p.Pick(mixKey(k), f)
				switch {
				case got == out:
					t.Fatalf("key %d picked the refused backend", k)
				case before[k] != out && got != before[k]:
					t.Fatalf("key %d moved from %s to %s although %s is fine", k, short(before[k]), short(got), short(before[k]))
				case before[k] == out:
					owned++
					moved[got]++
					if again := p.Pick(mixKey(k), f); again != got {
						t.Fatalf("key %d fell back to %s, then to %s", k, short(got), short(again))
					}
				}
			}
			fair := float64(owned) / 9
			for _, b := range bs {
				if b == out {
					continue
				}
				if share := float64(moved[b]); share < 0.5*fair || share > 1.5*fair {
					t.Errorf("%s took %d of the %d moved keys; want about %.0f", short(b), moved[b], owned, fair)
				}
			}
			out.SetHealthy(true)
			for k := range keys {
				if got := p.Pick(mixKey(k), Filter{}); got != before[k] {
					t.Fatalf("key %d is on %s after the backend came back, was on %s", k, short(got), short(before[k]))
				}
			}
		})
	}
}

// TestPickWithFilterAllocs: a filter with refusals costs no allocation.
func TestPickWithFilterAllocs(t *testing.T) {
	for _, alg := range algorithms {
		bs := equalPool(t, 50)
		p := alg.build(bs, Options{})
		bs[7].SetHealthy(false)
		var f Filter
		f.Add(bs[9])
		key := uint64(0)
		if a := testing.AllocsPerRun(1000, func() { key += 0x9e3779b97f4a7c15; p.Pick(key, f) }); a != 0 {
			t.Errorf("%s: %v allocations per filtered pick, want 0", alg.name, a)
		}
	}
}
