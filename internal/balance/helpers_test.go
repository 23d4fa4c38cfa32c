package balance

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"testing"

	"relay/internal/backend"
)

// pool returns one backend per weight, named a, b, c, ... for small pools
// and host-N beyond that, so tests can talk about them by name.
func pool(t testing.TB, weights ...int) []*backend.Backend {
	t.Helper()
	bs := make([]*backend.Backend, len(weights))
	for i, w := range weights {
		host := fmt.Sprintf("host-%d", i)
		if len(weights) <= 26 {
			host = string(rune('a' + i))
		}
		b, err := backend.New(&url.URL{Scheme: "http", Host: host + ":80"}, w)
		if err != nil {
			t.Fatalf("backend.New(%q, %d): %v", host, w, err)
		}
		bs[i] = b
	}
	return bs
}

// equalPool returns n backends of weight 1.
func equalPool(t testing.TB, n int) []*backend.Backend {
	t.Helper()
	w := make([]int, n)
	for i := range w {
		w[i] = 1
	}
	return pool(t, w...)
}

// seeded returns a deterministic Rand for tests that run on one goroutine.
func seeded(seed uint64) func(int) int {
	return rand.New(rand.NewPCG(seed, seed^0x5eed)).IntN
}

// short names a backend by its host, so failures read "a" rather than a URL.
func short(b *backend.Backend) string {
	if b == nil {
		return "<nil>"
	}
	return b.URL.Hostname()
}

// counts tallies picks per backend.
func counts(p Picker, picks int, key func(i int) uint64) map[*backend.Backend]int {
	got := make(map[*backend.Backend]int)
	for i := range picks {
		got[p.Pick(key(i), Filter{})]++
	}
	return got
}

func noKey(int) uint64 { return 0 }

// mixKey spreads sequential integers over the key space the way a hash of a
// client address would.
func mixKey(i int) uint64 {
	var b [8]byte
	for k := range b {
		b[k] = byte(uint64(i) >> (8 * k))
	}
	return HashKey(b[:])
}

// within reports whether got is within tol (a fraction) of want.
func within(got, want, tol float64) bool {
	return got >= want*(1-tol) && got <= want*(1+tol)
}
