package balance

import (
	"fmt"
	"testing"
	"time"

	"relay/internal/backend"
)

// rotations are the pickers that keep a shared position, in every form.
var rotations = []struct {
	name string
	p    func(bs []*backend.Backend, o Options) Picker
}{
	{"round-robin", NewRoundRobin},
	{"weighted table", NewWeightedRoundRobin},
	{"weighted loop", func(bs []*backend.Backend, o Options) Picker {
		s := newSmooth(bs)
		s.rand = o.randN()
		return s
	}},
}

// TestRetryKeepsTheFirstPicksEven: with a out (its breaker open) and b
// failing every request it gets, each request that lands on b is retried.
// The retries must not take turns from the shared position, or the next
// request starts on b again: first picks split evenly between b and c, and
// every retry lands on c.
func TestRetryKeepsTheFirstPicksEven(t *testing.T) {
	for _, r := range rotations {
		t.Run(r.name, func(t *testing.T) {
			bs := equalPool(t, 3)
			a, b, c := bs[0], bs[1], bs[2]
			a.Eject(time.Now().Add(time.Hour))
			p := r.p(bs, Options{Rand: seeded(1)})
			first := map[*backend.Backend]int{}
			for range 300 {
				got := p.Pick(0, Filter{})
				first[got]++
				if got != b {
					continue
				}
				var f Filter
				f.Add(b)
				f.Retry = true
				if again := p.Pick(0, f); again != c {
					t.Fatalf("a retry from b went to %s, want c", short(again))
				}
			}
			if first[b] != 150 || first[c] != 150 || first[a] != 0 {
				t.Errorf("first picks a %d, b %d, c %d of 300; want 0, 150, 150", first[a], first[b], first[c])
			}
		})
	}
}

// TestRetrySpreadsByWeight: the retries of requests that failed on one
// backend spread over the others in proportion to their weights (not all
// onto the backend after it), and leave the first picks' order as it was.
func TestRetrySpreadsByWeight(t *testing.T) {
	for _, r := range rotations {
		t.Run(r.name, func(t *testing.T) {
			bs := pool(t, 1, 1, 1, 1)
			weights := map[*backend.Backend]float64{bs[0]: 1, bs[1]: 1, bs[2]: 1, bs[3]: 1}
			if r.name != "round-robin" {
				bs = pool(t, 3, 1, 2, 2)
				weights = map[*backend.Backend]float64{bs[1]: 1, bs[2]: 2, bs[3]: 2}
			} else {
				delete(weights, bs[0])
			}
			p := r.p(bs, Options{Rand: seeded(7)})
			var order []*backend.Backend
			for range 16 {
				order = append(order, p.Pick(0, Filter{}))
			}
			var f Filter
			f.Add(bs[0])
			f.Retry = true
			const retries = 10000
			got := map[*backend.Backend]int{}
			for range retries {
				got[p.Pick(0, f)]++
			}
			if got[bs[0]] != 0 {
				t.Fatalf("a retry went back to the backend it was tried on")
			}
			var sum float64
			for _, w := range weights {
				sum += w
			}
			for b, w := range weights {
				if want := retries * w / sum; !within(float64(got[b]), want, 0.1) {
					t.Errorf("%s took %d of %d retries; want about %.0f", short(b), got[b], retries, want)
				}
			}
			// The first picks go on where they stood: retries moved nothing.
			for i := range 16 {
				if got := p.Pick(0, Filter{}); got != order[i] {
					t.Fatalf("first pick %d after the retries is %s, want %s as in the first cycle", i, short(got), short(order[i]))
				}
			}
		})
	}
}

// TestRetryPickRespectsTheFilter: for every algorithm a retry never
// returns a backend the filter refuses, finds one when one is allowed, and
// allocates nothing.
func TestRetryPickRespectsTheFilter(t *testing.T) {
	for _, alg := range algorithms {
		for _, n := range []int{1, 3, 300} {
			t.Run(fmt.Sprintf("%s/n=%d", alg.name, n), func(t *testing.T) {
				bs := equalPool(t, n)
				p := alg.build(bs, Options{Rand: seeded(uint64(n))})
				for i, b := range bs {
					if i%2 == 1 {
						b.SetHealthy(false)
					}
				}
				f := Filter{Retry: true}
				if n > 1 {
					f.Add(bs[0])
				}
				for k := range 500 {
					b := p.Pick(mixKey(k), f)
					if n > 1 && (b == nil || !f.Allows(b)) {
						t.Fatalf("retry pick %d returned %s", k, short(b))
					}
					if n == 1 && b != bs[0] {
						t.Fatalf("retry pick %d returned %s, want the one backend", k, short(b))
					}
				}
				if a := testing.AllocsPerRun(200, func() { p.Pick(7, f) }); a != 0 {
					t.Errorf("%v allocations per retry pick, want 0", a)
				}
				for _, b := range bs {
					b.SetDisabled(true)
				}
				if b := p.Pick(1, f); b != nil {
					t.Fatalf("retry picked %s with every backend disabled", short(b))
				}
			})
		}
	}
}
