package balance

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"relay/internal/backend"
)

// TestBoundedMovesOnlyOverloaded: under a balance factor a key stays on
// its own backend while that backend is under the bound; once one backend
// is over it, exactly its keys move, each to where its fallback order
// would take it were that backend out, and the others' keys stay.
func TestBoundedMovesOnlyOverloaded(t *testing.T) {
	bs := equalPool(t, 10)
	plain := NewIPHash(bs, Options{})
	bounded := NewIPHash(bs, Options{BalanceFactor: 125})
	load := func(b *backend.Backend, n int) {
		for range n {
			b.Acquire()
		}
	}
	for _, b := range bs {
		load(b, 10) // 100 in flight: each may hold ceil(ceil(1.25*101)/10) = 13
	}
	for i := range 1000 {
		if got, want := bounded.Pick(mixKey(i), Filter{}), plain.Pick(mixKey(i), Filter{}); got != want {
			t.Fatalf("key %d at even load went to %s, want its own %s", i, short(got), short(want))
		}
	}
	hot := bs[3]
	load(hot, 3) // 13: at its share, no more
	moved := 0
	for i := range 1000 {
		own := plain.Pick(mixKey(i), Filter{})
		var out Filter
		out.Add(hot)
		want := own
		if own == hot {
			want = plain.Pick(mixKey(i), out)
			moved++
		}
		if got := bounded.Pick(mixKey(i), Filter{}); got != want {
			t.Fatalf("key %d (own %s) went to %s with %s over the bound; want %s", i, short(own), short(got), short(hot), short(want))
		}
	}
	if moved == 0 {
		t.Fatal("no key of the loaded backend among 1000")
	}
	// Nothing under the bound (every other member out): the key's first
	// allowed backend still takes it.
	for _, b := range bs {
		if b != hot {
			b.SetDisabled(true)
		}
	}
	if got := bounded.Pick(mixKey(1), Filter{}); got != hot {
		t.Errorf("with only %s in rotation, over the bound, the pick was %s", short(hot), short(got))
	}
}

// TestBoundedNoAllocs: a bounded pick allocates nothing.
func TestBoundedNoAllocs(t *testing.T) {
	bs := equalPool(t, 10)
	p := NewIPHash(bs, Options{BalanceFactor: 125})
	for range 50 {
		bs[0].Acquire()
	}
	if n := testing.AllocsPerRun(1000, func() { p.Pick(mixKey(7), Filter{}) }); n != 0 {
		t.Errorf("%v allocations per pick, want 0", n)
	}
}

// zipfRun simulates requests for 10,000 keys of Zipf-skewed popularity
// (s = 1.1, fixed seed) over 10 backends: each tick 100 requests arrive
// and each holds its backend for 10 ticks, so about 1,000 are in flight.
// It reports the largest max/average in flight at the end of a tick
// (peak: with 1,000 in flight, the steady state), its mean over ticks, and
// the share of requests that did not go to their key's first choice.
// Within a tick the average dips by the tick's departures before its
// arrivals refill it, so the bound is checked at each pick instead: check,
// when set, sees every pick with the capacity HAProxy's formula gives.
type zipfResult struct {
	peak, mean, left float64
}

func zipfRun(t testing.TB, factor int, check func(b *backend.Backend, slots int64)) zipfResult {
	bs := equalPool(t, 10)
	p := NewIPHash(bs, Options{BalanceFactor: factor})
	own := NewIPHash(bs, Options{})
	const (
		keys, perTick, hold, ticks = 10_000, 100, 10, 2_000
	)
	hashes := make([]uint64, keys)
	for i := range hashes {
		hashes[i] = HashKey(fmt.Appendf(nil, "key-%d", i))
	}
	z := rand.NewZipf(rand.New(rand.NewPCG(27, 1608)), 1.1, 1, keys-1)
	ring := make([][]*backend.Backend, hold)
	var r zipfResult
	var requests, left, measured int
	for tick := range ticks {
		slot := tick % hold
		for _, b := range ring[slot] {
			b.Release()
		}
		ring[slot] = ring[slot][:0]
		var total int64
		for _, b := range bs {
			total += b.InFlight()
		}
		for range perTick {
			k := hashes[z.Uint64()]
			b := p.Pick(k, Filter{})
			if check != nil {
				check(b, ((total+1)*int64(factor)+99)/100)
			}
			b.Acquire()
			total++
			ring[slot] = append(ring[slot], b)
			requests++
			if b != own.Pick(k, Filter{}) {
				left++
			}
		}
		if tick < hold {
			continue // warming up
		}
		var most int64
		for _, b := range bs {
			most = max(most, b.InFlight())
		}
		ratio := float64(most) / (float64(total) / float64(len(bs)))
		r.peak = max(r.peak, ratio)
		r.mean += ratio
		measured++
	}
	r.mean /= float64(measured)
	r.left = float64(left) / float64(requests)
	return r
}

// TestBoundedZipf: with hash_balance_factor 125, no backend ever holds
// more than its bound, ceil(ceil(1.25 * (in flight + 1)) / 10), so max /
// average stays within 1.25 plus one request; plain consistent hashing
// under the same skew is far above it. The figures are logged.
func TestBoundedZipf(t *testing.T) {
	plain := zipfRun(t, 0, nil)
	bounded := zipfRun(t, 125, func(b *backend.Backend, slots int64) {
		// After this pick b holds InFlight+1; the bound allows it.
		if limit := (slots + 9) / 10; b.InFlight()+1 > limit {
			t.Fatalf("a pick took %s to %d in flight, over its bound %d", short(b), b.InFlight()+1, limit)
		}
	})
	t.Logf("plain consistent hashing: max/average in flight peak %.3f, mean %.3f; requests off their key's first choice %.1f%%",
		plain.peak, plain.mean, 100*plain.left)
	t.Logf("hash_balance_factor 125: max/average in flight peak %.3f, mean %.3f; requests off their key's first choice %.1f%%",
		bounded.peak, bounded.mean, 100*bounded.left)
	if plain.left != 0 {
		t.Errorf("plain consistent hashing moved %.1f%% of requests, want none", 100*plain.left)
	}
	// One request over 1.25x the average of about 100 is 0.01.
	if bounded.peak > 1.25+0.02 {
		t.Errorf("bounded max/average in flight peaked at %.3f, want within 1.25 and one request", bounded.peak)
	}
	if plain.peak < 1.5 {
		t.Errorf("plain max/average in flight peaked at only %.2f; the skew should overload a backend", plain.peak)
	}
}
