package balance

import (
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"strings"

	"github.com/cespare/xxhash/v2"

	"relay/internal/backend"
)

// Table sizing: at least slotsPerBackend slots per backend keeps every
// backend's share close to its weight; rounding up to a prime just above a
// power of two means the size, and with it the whole mapping, only changes
// when the pool crosses such a boundary, not on every membership change.
const (
	minTableBits    = 16
	slotsPerBackend = 100
	// skipSeed makes the second permutation hash independent of the first.
	skipSeed = 0x9e3779b97f4a7c15
	// timeScale is the fixed-point unit of walk times. The largest step
	// time, ln(2M), stays far below 2^32/timeScale for any table size, so
	// a time fits the high word of a slot's claim.
	timeScale = 1 << 26
)

// NewIPHash returns a consistent-hashing picker: key, a hash of the client
// address (see HashAddr), always maps to the same backend while the set of
// backends is unchanged, and when one backend leaves only the keys it owned
// move, spread over the others; when it returns they move back.
//
// Lookups are one multiplication and one index into a table of M slots (M
// prime, at least 65537 and 100 per backend), as in Maglev, so they cost the
// same at thousands of backends. Each backend walks the slots in its own
// Maglev permutation, derived from two hashes of its Name. Where classic
// Maglev lets backends take turns claiming their next free slot, which keeps
// shares perfectly even but reshuffles a few slots of the remaining backends
// whenever one leaves, here each slot goes to the backend that reaches it
// earliest, with a backend's r-th step taking the time -ln(1-r/M)/weight.
// The owner of a slot therefore depends only on the backends competing for
// it, so removing one moves exactly its own slots; the exponential step
// times make each backend's expected share exactly weight/sum(weights)
// (3:1:1 gives 60/20/20%). The price is that shares scatter around it as
// random samples do, by about 1/sqrt(slots per backend): measured, every
// backend's share is within 4% of its due at ten backends, 8% at a hundred
// and 21% at a thousand, where classic Maglev is within one slot.
//
// A backend that may not be picked now (failing checks, ejected, drained) or
// that this request already tried stays in the table; its keys follow their
// own fallback order instead: lookups at a fixed sequence of rehashes of the
// key, until one lands on an allowed backend. So the keys of a backend that
// is out spread over all the others in proportion to their weights, as with
// Maglev's preference lists, keys of the others do not move, and when it
// comes back its keys return; and no table is rebuilt when availability
// changes.
//
// The order of bs does not matter: equal times are settled by Name. The one
// change that remaps every key is the table growing or shrinking, which
// happens only when the pool crosses 655, 1,310, 2,621... backends.
//
// With o.BalanceFactor set, a key whose backend is over the load bound
// follows the same fallback order to a backend under it (bounded.go).
func NewIPHash(bs []*backend.Backend, o Options) Picker {
	if len(bs) == 0 {
		return empty{}
	}
	sorted := clone(bs)
	slices.SortStableFunc(sorted, func(a, b *backend.Backend) int { return strings.Compare(a.Name, b.Name) })
	return &ipHash{bs: sorted, table: maglevTable(sorted), factor: o.BalanceFactor}
}

// HashKey hashes b, for example a client address's bytes, into the key that
// Pick expects.
func HashKey(b []byte) uint64 { return xxhash.Sum64(b) }

// HashAddr hashes a client address into the key that Pick expects. An IPv4
// address and its IPv4-mapped IPv6 form hash alike, and zones are ignored, so
// a client keeps its key however the listener reports it.
func HashAddr(a netip.Addr) uint64 {
	b := a.As16()
	return xxhash.Sum64(b[:])
}

type ipHash struct {
	bs []*backend.Backend
	// table holds indexes into bs rather than pointers: half the memory and
	// nothing for the garbage collector to scan.
	table []int32
	// factor is Options.BalanceFactor: 0, or the load bound in percent.
	factor int
}

func (p *ipHash) Pick(key uint64, f Filter) *backend.Backend {
	if p.factor > 0 {
		return p.pickBounded(key, &f)
	}
	if b := p.lookup(key); f.Allows(b) {
		return b
	}
	// The key's fallback order: further lookups from a sequence of
	// rehashes of the key. The same key always falls back the same way,
	// and every lookup lands on a backend in proportion to its share.
	s := splitMix(key)
	for range fallbacks {
		if b := p.lookup(s.next()); f.Allows(b) {
			return b
		}
	}
	return scan(p.bs, int(key%uint64(len(p.bs))), &f)
}

// fallbacks bounds the rehashed lookups before a pick scans; with half the
// backends refused, all of them miss once in 2^32 picks.
const fallbacks = 32

// lookup returns the owner of key's slot.
func (p *ipHash) lookup(key uint64) *backend.Backend {
	// The high word of key*M is key scaled into [0, M): uniform for a
	// well-mixed key and cheaper than a division.
	slot, _ := bits.Mul64(key, uint64(len(p.table)))
	return p.bs[p.table[slot]]
}

// maglevTable assigns every slot to the backend whose permutation reaches
// it earliest, as described on NewIPHash. bs must be sorted by Name.
func maglevTable(bs []*backend.Backend) []int32 {
	m := tableSize(len(bs))
	// stepTime[r] turns rank r, uniform over the table, into an exponential
	// variate; dividing it by weight makes heavier backends proportionally
	// faster, the trick of weighted rendezvous hashing. Fixed point keeps
	// every comparison exact, so equal times are truly equal.
	stepTime := make([]uint64, m)
	for r := range stepTime {
		stepTime[r] = uint64(-math.Log1p(-(float64(r)+0.5)/float64(m)) * timeScale)
	}

	type walk struct {
		pos, skip, rank int
		// pace is 2^32/weight: a step's time is stepTime*pace>>32, a
		// multiplication where a division would dominate the build.
		pace uint64
	}
	walks := make([]walk, len(bs))
	totalWeight := 0.0
	for i, b := range bs {
		offset, skip := permutation(b.Name, m)
		walks[i] = walk{pos: offset, skip: skip, pace: (1 << 32) / min(uint64(b.EffectiveWeight()), 1<<32)}
		totalWeight += float64(b.EffectiveWeight())
	}

	// Each slot holds the best claim so far: time in the high word, the
	// backend's index (its place in Name order) in the low word, so one
	// comparison picks the earliest time and settles equal times by Name.
	const empty = math.MaxUint64
	slots := make([]uint64, m)
	for p := range slots {
		slots[p] = empty
	}
	filled := 0
	// Walk every backend up to a time horizon, then extend it until every
	// slot is claimed. A slot is still empty at time t with probability
	// exp(-t*totalWeight), so the first horizon, ln(M)/totalWeight, leaves
	// about one slot empty and a round or two more finish the table. Any claim that could beat a
	// slot's final one is earlier, so it was walked before the horizon
	// passed it: the result does not depend on the horizons chosen.
	// Horizons are in fixed point too, and always advance by at least one
	// unit, so the loop ends however large the weights.
	step := max(1, uint64(0.5/totalWeight*timeScale))
	for limit := uint64(math.Log(float64(m)) / totalWeight * timeScale); filled < m; limit += step {
		for i := range walks {
			w := &walks[i]
			pos, rank := w.pos, w.rank
			for ; rank < m; rank++ {
				t := stepTime[rank] * w.pace >> 32
				if t > limit {
					break
				}
				if claim := t<<32 | uint64(i); claim < slots[pos] {
					if slots[pos] == empty {
						filled++
					}
					slots[pos] = claim
				}
				if pos += w.skip; pos >= m {
					pos -= m
				}
			}
			w.pos, w.rank = pos, rank
		}
	}
	table := make([]int32, m)
	for p, claim := range slots {
		table[p] = int32(uint32(claim))
	}
	return table
}

// tableSize returns the smallest prime above a power of two (2^16 or more)
// that gives n backends slotsPerBackend slots each.
func tableSize(n int) int {
	k := minTableBits
	for 1<<k < slotsPerBackend*n {
		k++
	}
	return nextPrime(1 << k)
}

// permutation returns where name's walk over a table of m slots starts and
// its stride. m is prime, so any stride in [1, m) visits every slot once.
func permutation(name string, m int) (offset, skip int) {
	var d xxhash.Digest
	d.ResetWithSeed(skipSeed)
	d.WriteString(name)
	return int(xxhash.Sum64String(name) % uint64(m)), int(d.Sum64()%uint64(m-1)) + 1
}

func nextPrime(n int) int {
	for ; !isPrime(n); n++ {
	}
	return n
}

func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}
