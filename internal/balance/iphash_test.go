package balance

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"relay/internal/backend"
)

const hashKeys = 100000

// mapping records which backend each of the test keys lands on.
func mapping(p Picker) []*backend.Backend {
	m := make([]*backend.Backend, hashKeys)
	for i := range m {
		m[i] = p.Pick(mixKey(i), Filter{})
	}
	return m
}

func without(bs []*backend.Backend, i int) []*backend.Backend {
	return append(clone(bs[:i]), bs[i+1:]...)
}

func TestIPHashStable(t *testing.T) {
	bs := equalPool(t, 10)
	first := mapping(NewIPHash(bs, Options{}))
	// The slice order must not matter: relay instances that list the same
	// backends differently agree on every key.
	shuffled := clone(bs)
	rand.New(rand.NewPCG(7, 7)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	for name, p := range map[string]Picker{"same picker": NewIPHash(bs, Options{}), "shuffled slice": NewIPHash(shuffled, Options{})} {
		for i, b := range mapping(p) {
			if b != first[i] {
				t.Fatalf("%s: key %d moved from %s to %s", name, i, short(first[i]), short(b))
			}
		}
	}
}

// When one backend leaves, exactly its keys move; they spread over the others
// rather than falling on one; when it returns, they come back.
func TestIPHashLeaveAndReturn(t *testing.T) {
	tests := []struct {
		name   string
		n      int
		leaver int
		// The moved keys must reach at least minReceivers backends, none
		// taking more than maxShare of them.
		minReceivers int
		maxShare     float64
	}{
		{name: "1 of 10", n: 10, leaver: 3, minReceivers: 9, maxShare: 0.25},
		{name: "first of 10", n: 10, leaver: 0, minReceivers: 9, maxShare: 0.25},
		// About 100 keys over 999 backends: most get one or none.
		{name: "1 of 1000", n: 1000, leaver: 517, minReceivers: 50, maxShare: 0.08},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := equalPool(t, tt.n)
			leaver := bs[tt.leaver]
			before := mapping(NewIPHash(bs, Options{}))
			after := mapping(NewIPHash(without(bs, tt.leaver), Options{}))
			moved, owned := 0, 0
			landed := make(map[*backend.Backend]int)
			for i := range before {
				if before[i] == leaver {
					owned++
					landed[after[i]]++
				}
				if before[i] == after[i] {
					continue
				}
				moved++
				if before[i] != leaver {
					t.Fatalf("key %d moved from %s, which stayed, to %s", i, short(before[i]), short(after[i]))
				}
			}
			if moved != owned {
				t.Errorf("%d of the leaver's %d keys moved, want all", moved, owned)
			}
			if limit := hashKeys * 12 / 100; moved > limit {
				t.Errorf("%d keys moved, want at most 12%% (%d)", moved, limit)
			}
			if len(landed) < tt.minReceivers {
				t.Errorf("moved keys landed on %d backends, want at least %d", len(landed), tt.minReceivers)
			}
			for b, c := range landed {
				if float64(c) > tt.maxShare*float64(owned) {
					t.Errorf("%s took %d of %d moved keys, want at most %.0f%%", short(b), c, owned, 100*tt.maxShare)
				}
			}
			back := mapping(NewIPHash(bs, Options{}))
			for i := range before {
				if back[i] != before[i] {
					t.Fatalf("key %d on %s before, %s after the leaver returned", i, short(before[i]), short(back[i]))
				}
			}
		})
	}
}

func TestIPHashShares(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		tol     float64 // relative
	}{
		{name: "3:1:1", weights: []int{3, 1, 1}, tol: 0.03},
		{name: "equal 10", weights: []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, tol: 0.05},
		{name: "5:2:1:1:1", weights: []int{5, 2, 1, 1, 1}, tol: 0.05},
		{name: "two", weights: []int{1, 1}, tol: 0.02},
		{name: "one", weights: []int{4}, tol: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := pool(t, tt.weights...)
			total := 0
			for _, w := range tt.weights {
				total += w
			}
			got := counts(NewIPHash(bs, Options{}), hashKeys, mixKey)
			for _, b := range bs {
				want := float64(hashKeys) * float64(b.Weight) / float64(total)
				if !within(float64(got[b]), want, tt.tol) {
					t.Errorf("%s (weight %d) got %d keys, want %.0f ±%.0f%%", short(b), b.Weight, got[b], want, 100*tt.tol)
				}
			}
		})
	}
}

// With two backends losing one, every key goes to the survivor.
func TestIPHashTwoToOne(t *testing.T) {
	bs := equalPool(t, 2)
	for i, b := range mapping(NewIPHash(bs[1:], Options{})) {
		if b != bs[1] {
			t.Fatalf("key %d on %s with only b left", i, short(b))
		}
	}
}

func TestTableSize(t *testing.T) {
	tests := []struct {
		n        int
		min, max int
	}{
		{n: 1, min: 65537, max: 65537},
		{n: 655, min: 65537, max: 65537},
		{n: 656, min: 131072, max: 131200},
		{n: 1000, min: 131072, max: 131200},
		{n: 10000, min: 1 << 20, max: 1<<20 + 200},
	}
	for _, tt := range tests {
		m := tableSize(tt.n)
		if m < tt.min || m > tt.max || !isPrime(m) || m < slotsPerBackend*tt.n {
			t.Errorf("tableSize(%d) = %d, want a prime in [%d, %d] with %d slots per backend", tt.n, m, tt.min, tt.max, slotsPerBackend)
		}
	}
}

func TestHashAddr(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{name: "IPv4 and its mapped form", a: "192.0.2.1", b: "::ffff:192.0.2.1", same: true},
		{name: "zone ignored", a: "fe80::1%eth0", b: "fe80::1", same: true},
		{name: "neighbours differ", a: "192.0.2.1", b: "192.0.2.2", same: false},
		{name: "v4 differs from v6", a: "0.0.0.1", b: "::1", same: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ha, hb := HashAddr(netip.MustParseAddr(tt.a)), HashAddr(netip.MustParseAddr(tt.b))
			if (ha == hb) != tt.same {
				t.Errorf("HashAddr(%s) = %#x, HashAddr(%s) = %#x, want same = %v", tt.a, ha, tt.b, hb, tt.same)
			}
		})
	}
	a := netip.MustParseAddr("198.51.100.7").As16()
	if HashKey(a[:]) != HashAddr(netip.MustParseAddr("198.51.100.7")) {
		t.Error("HashKey of an address's 16 bytes differs from HashAddr")
	}
}
