package balance

import (
	"testing"

	"relay/internal/backend"
)

// load sets each backend's in-flight count.
func load(bs []*backend.Backend, inFlight ...int) {
	for i, n := range inFlight {
		for bs[i].InFlight() < int64(n) {
			bs[i].Acquire()
		}
		for bs[i].InFlight() > int64(n) {
			bs[i].Release()
		}
	}
}

func TestLeastConnPicksMin(t *testing.T) {
	tests := []struct {
		name     string
		weights  []int
		inFlight []int
		want     string
	}{
		{name: "first", weights: []int{1, 1, 1}, inFlight: []int{0, 2, 5}, want: "a"},
		{name: "middle", weights: []int{1, 1, 1}, inFlight: []int{3, 1, 2}, want: "b"},
		{name: "last", weights: []int{1, 1, 1}, inFlight: []int{3, 2, 1}, want: "c"},
		{name: "weight scales load", weights: []int{4, 1}, inFlight: []int{3, 1}, want: "a"},
		{name: "weight not enough", weights: []int{2, 1}, inFlight: []int{5, 2}, want: "b"},
		{name: "single", weights: []int{1}, inFlight: []int{9}, want: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := pool(t, tt.weights...)
			load(bs, tt.inFlight...)
			p := NewLeastConn(bs, Options{Rand: seeded(3)})
			for range 20 {
				if got := short(p.Pick(0, Filter{})); got != tt.want {
					t.Fatalf("picked %s, want %s", got, tt.want)
				}
			}
		})
	}
}

// Ties are settled at random over the tied backends only, reproducibly for
// a given Rand, and without asking Rand anything when there is no tie.
func TestLeastConnTies(t *testing.T) {
	bs := pool(t, 1, 1, 1, 1, 1)
	load(bs, 1, 0, 3, 0, 0)
	t.Run("fair", func(t *testing.T) {
		got := counts(NewLeastConn(bs, Options{Rand: seeded(4)}), 30000, noKey)
		for _, i := range []int{1, 3, 4} {
			if !within(float64(got[bs[i]]), 10000, 0.05) {
				t.Errorf("tied %s got %d picks, want 10000 ±5%%", short(bs[i]), got[bs[i]])
			}
		}
		if got[bs[0]]+got[bs[2]] != 0 {
			t.Errorf("busier backends got %d and %d picks, want none", got[bs[0]], got[bs[2]])
		}
	})
	t.Run("reproducible", func(t *testing.T) {
		sequence := func(seed uint64) string {
			p := NewLeastConn(bs, Options{Rand: seeded(seed)})
			var s []byte
			for range 64 {
				s = append(s, short(p.Pick(0, Filter{}))...)
			}
			return string(s)
		}
		if a, b := sequence(8), sequence(8); a != b {
			t.Errorf("same Rand gave different picks:\n%s\n%s", a, b)
		}
		if a, b := sequence(8), sequence(9); a == b {
			t.Errorf("different Rand seeds gave the same 64 picks %s", a)
		}
	})
	t.Run("no tie, no draw", func(t *testing.T) {
		distinct := pool(t, 1, 1, 1)
		load(distinct, 2, 0, 1)
		p := NewLeastConn(distinct, Options{Rand: func(int) int {
			t.Fatal("Rand called without a tie")
			return 0
		}})
		if got := short(p.Pick(0, Filter{})); got != "b" {
			t.Errorf("picked %s, want b", got)
		}
	})
	t.Run("large idle pool", func(t *testing.T) {
		big := equalPool(t, 1000)
		got := counts(NewLeastConn(big, Options{Rand: seeded(10)}), 20000, noKey)
		if len(got) < 990 {
			t.Errorf("20000 picks over 1000 idle backends reached only %d of them", len(got))
		}
		for b, c := range got {
			if c > 60 {
				t.Errorf("%s got %d of 20000 picks, want about 20", short(b), c)
			}
		}
	})
}

// simulateLoad runs clients that each send a request, wait for it and send
// the next, against backends that answer in serviceTicks[i] ticks, and
// returns how many requests each backend got. It is a discrete simulation,
// so the result is deterministic: at every tick finished requests release
// their backend before waiting clients pick, as the proxy would.
func simulateLoad(p Picker, bs []*backend.Backend, serviceTicks []int, clients, ticks int) []int {
	idx := make(map[*backend.Backend]int, len(bs))
	for i, b := range bs {
		idx[b] = i
	}
	served := make([]int, len(bs))
	type request struct {
		b    *backend.Backend
		done int
	}
	active := make([]request, 0, clients)
	for now := 0; now < ticks; now++ {
		kept := active[:0]
		for _, r := range active {
			if r.done == now {
				r.b.Release()
				continue
			}
			kept = append(kept, r)
		}
		active = kept
		for len(active) < clients {
			b := p.Pick(0, Filter{})
			b.Acquire()
			served[idx[b]]++
			active = append(active, request{b: b, done: now + serviceTicks[idx[b]]})
		}
	}
	for _, r := range active {
		r.b.Release()
	}
	return served
}

// A backend that answers ten times slower holds its requests longer, so
// least-conn sends it clearly less; round robin, blind to load, does not,
// which shows the simulation can tell the difference.
func TestLeastConnAvoidsSlowBackend(t *testing.T) {
	service := []int{1, 1, 10}
	tests := []struct {
		name      string
		build     Constructor
		slowShare func(fast, slow int) bool
		want      string
	}{
		{name: "least-conn", build: NewLeastConn, slowShare: func(fast, slow int) bool { return slow*4 < fast }, want: "under a quarter of a fast backend's"},
		{name: "round-robin control", build: NewRoundRobin, slowShare: func(fast, slow int) bool { return within(float64(slow), float64(fast), 0.05) }, want: "the same as a fast backend's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := equalPool(t, 3)
			served := simulateLoad(tt.build(bs, Options{Rand: seeded(5)}), bs, service, 6, 2000)
			if !tt.slowShare(served[0], served[2]) || !within(float64(served[0]), float64(served[1]), 0.1) {
				t.Errorf("served %v (fast, fast, slow): want the slow backend's share %s", served, tt.want)
			}
			for _, b := range bs {
				if b.InFlight() != 0 {
					t.Errorf("%s has %d in flight after the run", short(b), b.InFlight())
				}
			}
		})
	}
}
