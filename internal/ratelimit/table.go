package ratelimit

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultKeys is the buckets a table holds unless told otherwise: 2^20,
// about a million clients, in 18 MiB.
const DefaultKeys = 1 << 20

// A Table is a fixed array of token buckets, in sets: a key hashes to
// one set and takes one of its ways. Nothing in it is a pointer, so the
// same words can live in the process's memory or in a mapping every
// serving process of a relay shares (shared_linux.go): a limit then holds
// for relay as a whole, as exactly as for one process.
//
// Layout, in 64-bit words: a header (tableMagic, the number of sets, the
// two words of the hash's secret seed), then the sets. A set is 128
// bytes: a lock word, a spare word, and ways slots of two words, the
// key's hash (0: empty) and its bucket's tat.
//
// A request whose key is in its set takes a token with one compare-and-
// swap of the tat, without the lock, as a single shared bucket would.
// The lock is taken only to give a new key a slot. The slot it takes is
// the one whose bucket is fullest (lowest tat), so the memory is bounded
// and an idle client's bucket, full again, gives its place at no cost: a
// bucket at or below now is exactly a missing one. Only when all ways of
// a set hold buckets still refilling does a new key evict a client that
// was limited; that client's next request starts from a full bucket.
type Table struct {
	words []uint64
	sets  uint64
	seed  [2]uint64
	// base is the monotonic clock's reading at start, in nanoseconds: a
	// shared table's buckets are times every process must read alike.
	base  int64
	start time.Time
	pid   uint64 // the lock word's value while this process holds a lock
	keep  any    // what must live as long as words (the mapping)
}

const (
	tableMagic  = 0x316c7279616c6572 // "relayrl1", little-endian
	headerWords = 8
	setWords    = 16
	ways        = (setWords - 2) / 2
)

// NewTable returns a table in this process's memory holding about keys
// buckets (DefaultKeys when keys is 0 or less).
func NewTable(keys int) *Table {
	words := make([]uint64, tableWords(keys))
	initHeader(words)
	t, _ := tableOver(words, nil)
	return t
}

// tableWords is the size of a table of about keys buckets.
func tableWords(keys int) int {
	if keys <= 0 {
		keys = DefaultKeys
	}
	sets := (keys + ways - 1) / ways
	return headerWords + sets*setWords
}

// initHeader writes a new table's header into words.
func initHeader(words []uint64) {
	var seed [16]byte
	rand.Read(seed[:])
	words[0] = tableMagic
	words[1] = uint64((len(words) - headerWords) / setWords)
	words[2] = binary.LittleEndian.Uint64(seed[:8])
	words[3] = binary.LittleEndian.Uint64(seed[8:])
}

// tableOver returns the table whose words these are, after checking its
// header.
func tableOver(words []uint64, keep any) (*Table, error) {
	if len(words) < headerWords+setWords || words[0] != tableMagic ||
		words[1] != uint64((len(words)-headerWords)/setWords) {
		return nil, errBadTable
	}
	t := &Table{words: words, sets: words[1], seed: [2]uint64{words[2], words[3]},
		pid: uint64(os.Getpid()), keep: keep}
	t.start, t.base = clockPair()
	return t, nil
}

// clockPair reads time.Now and the monotonic clock at one instant, as
// near as it can: the closest of a few readings between two time.Now
// calls. Processes that read the pair a microsecond apart would see one
// bucket a microsecond fuller or emptier.
func clockPair() (time.Time, int64) {
	var start time.Time
	var base int64
	best := time.Duration(1<<63 - 1)
	for range 5 {
		t1 := time.Now()
		m := monotonic()
		t2 := time.Now()
		if d := t2.Sub(t1); d < best {
			best, start, base = d, t1.Add(d/2), m
		}
	}
	return start, base
}

// Keys returns the number of buckets t can hold.
func (t *Table) Keys() int { return int(t.sets) * ways }

// Len returns the keys t holds now.
func (t *Table) Len() int {
	n := 0
	for s := range t.sets {
		set := t.set(s)
		for w := range ways {
			if atomic.LoadUint64(&set[2+2*w]) != 0 {
				n++
			}
		}
	}
	return n
}

// Limit returns the limiter of spec s over t. name tells one limit's
// buckets from another's: limits of the same name share their buckets,
// in every process of a shared table.
func (t *Table) Limit(name string, s Spec) Limiter {
	return &tableLimit{t: t, spec: s, g: newGCRA(s), id: t.hash(0, []byte(name))}
}

type tableLimit struct {
	t    *Table
	spec Spec
	g    gcra
	id   uint64
}

func (l *tableLimit) Spec() Spec { return l.spec }

func (l *tableLimit) Take(key []byte, now time.Time) Decision {
	return l.t.take(l.t.hash(l.id, key), l.g, l.t.clock(now))
}

// clock is now in nanoseconds of the monotonic clock, which every process
// reads alike.
func (t *Table) clock(now time.Time) int64 { return t.base + int64(now.Sub(t.start)) }

// set returns the words of set s.
func (t *Table) set(s uint64) []uint64 {
	at := headerWords + s*setWords
	return t.words[at : at+setWords : at+setWords]
}

// take takes a token for the key whose hash is h at now.
func (t *Table) take(h uint64, g gcra, now int64) Decision {
	hi, _ := bits.Mul64(h, t.sets)
	set := t.set(hi)
	for {
		if d, ok := takeIn(set, h, g, now); ok {
			return d
		}
		if d, ok := t.insert(set, h, g, now); ok {
			return d
		}
		// Another request gave the key its slot first: take from it.
	}
}

// takeIn takes a token from h's slot in set; ok is false when the set
// does not hold h, or lost it to another key meanwhile.
func takeIn(set []uint64, h uint64, g gcra, now int64) (d Decision, ok bool) {
	for w := range ways {
		key, tat := &set[2+2*w], &set[3+2*w]
		if atomic.LoadUint64(key) != h {
			continue
		}
		for {
			old := atomic.LoadUint64(tat)
			// A slot being given to another key has its key cleared
			// before its tat is written, so a tat read while the key is
			// still h is h's.
			if atomic.LoadUint64(key) != h {
				return d, false
			}
			next, d := g.take(int64(old), now)
			if !d.Allowed || atomic.CompareAndSwapUint64(tat, old, uint64(next)) {
				return d, true
			}
		}
	}
	return d, false
}

// insert gives h the fullest bucket's slot of set, under the set's lock,
// and takes its first token; ok is false when h has a slot already.
func (t *Table) insert(set []uint64, h uint64, g gcra, now int64) (Decision, bool) {
	t.lock(&set[0])
	defer atomic.StoreUint64(&set[0], 0)
	victim, low := 0, uint64(1<<64-1)
	for w := range ways {
		if atomic.LoadUint64(&set[2+2*w]) == h {
			return Decision{}, false
		}
		if tat := atomic.LoadUint64(&set[3+2*w]); tat < low {
			victim, low = w, tat
		}
	}
	next, d := g.take(now, now) // a full bucket
	key, tat := &set[2+2*victim], &set[3+2*victim]
	atomic.StoreUint64(key, 0)
	atomic.StoreUint64(tat, uint64(next))
	atomic.StoreUint64(key, h)
	return d, true
}

// lock takes a set's lock word. Its holder keeps it for a few loads and
// stores; a process that died holding it (a shared table outlives its
// processes) is found by its pid and the lock taken from it.
func (t *Table) lock(word *uint64) {
	for spins := 1; ; spins++ {
		if atomic.CompareAndSwapUint64(word, 0, t.pid) {
			return
		}
		if spins%64 == 0 {
			runtime.Gosched()
		}
		if spins%4096 == 0 {
			if holder := atomic.LoadUint64(word); holder != 0 && !alive(holder) {
				atomic.CompareAndSwapUint64(word, holder, 0)
			}
		}
	}
}

// alive reports whether process pid exists and has not exited: a
// process that died holding a lock may linger unreaped (a zombie) until
// the supervisor waits for it.
func alive(pid uint64) bool {
	return syscall.Kill(int(pid), 0) != syscall.ESRCH && !exited(pid)
}

// hash is the table's keyed hash of key within the limit id: a
// multiply-and-fold hash over a secret seed, so a client cannot choose
// keys that crowd one set. It is never 0, which marks an empty slot.
func (t *Table) hash(id uint64, key []byte) uint64 { return seededHash(t.seed, id, key) }

// seededHash is hash's arithmetic over any secret seed: a Redis store's
// lease table uses it too.
func seededHash(seed [2]uint64, id uint64, key []byte) uint64 {
	const p0, p1 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db
	s0, s1 := seed[0], seed[1]
	h := fold(s0^id^p0, s1^uint64(len(key)))
	for ; len(key) >= 8; key = key[8:] {
		h = fold(h^binary.LittleEndian.Uint64(key)^p1, s1^p0)
	}
	if len(key) > 0 {
		var tail [8]byte
		copy(tail[:], key)
		h = fold(h^binary.LittleEndian.Uint64(tail[:])^p1, s0^p1)
	}
	h = fold(h^s1, p0)
	if h == 0 {
		h = 1
	}
	return h
}

// fold multiplies a and b to 128 bits and folds the halves together.
func fold(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
