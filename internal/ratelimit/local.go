package ratelimit

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// seed keys the hashes of this process's limiters. A limiter whose
// buckets other processes share must agree on its keys with them, and
// would take its seed from them.
var seed = maphash.MakeSeed()

// HashAddr is the key of a client address.
func HashAddr(a netip.Addr) uint64 {
	b := a.Unmap().As16()
	return maphash.Bytes(seed, b[:])
}

// HashBytes is the key of a header's value.
func HashBytes(b []byte) uint64 { return maphash.Bytes(seed, b) }

// One is the one bucket of a limit every request shares (the route, or
// the pool, as a whole): an atomic word, no lock, no table.
type One struct {
	spec Spec
	g    gcra
	tat  atomic.Int64
}

// NewOne returns a single bucket, full.
func NewOne(s Spec) *One { return &One{spec: s, g: newGCRA(s)} }

// Spec returns the settings o enforces.
func (o *One) Spec() Spec { return o.spec }

// Take takes a token from the bucket; key is not read.
func (o *One) Take(_ uint64, now time.Duration) Decision {
	for {
		old := o.tat.Load()
		tat, d := o.g.take(time.Duration(old), now)
		if !d.Allowed || o.tat.CompareAndSwap(old, int64(tat)) {
			return d
		}
	}
}

// DefaultMaxKeys bounds the keys a Local limiter holds: 2^20, about a
// million clients, at about 60 bytes each (BenchmarkLocalMillion).
const DefaultMaxKeys = 1 << 20

// shards divides a Local limiter's table so that requests of different
// keys seldom wait for one another.
const shards = 64

// Local keeps a bucket per key in the process's memory, in a table of at
// most MaxKeys keys: when a shard is full, the key used least recently
// gives its place to the new one. An evicted key that comes back starts
// with a full bucket, which lets it burst again: that is lenient, and
// costs nothing when the evicted bucket had been idle long enough to
// refill (Burst/Rate seconds), which the least recently used one most
// likely had.
type Local struct {
	spec  Spec
	g     gcra
	shard [shards]shard
}

// shard is a part of the table: a map from key to slot and the slots in
// a list from most to least recently used.
type shard struct {
	mu    sync.Mutex
	index map[uint64]int32
	slots []slot
	max   int
	head  int32 // most recently used; -1 when empty
	tail  int32 // least recently used
	_     [24]byte
}

// slot is one key's bucket and its place in the recency list.
type slot struct {
	key        uint64
	tat        int64
	prev, next int32
}

// NewLocal returns a limiter holding at most maxKeys keys (at least one
// per shard); 0 means DefaultMaxKeys.
func NewLocal(s Spec, maxKeys int) *Local {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	l := &Local{spec: s, g: newGCRA(s)}
	per := max(1, (maxKeys+shards-1)/shards)
	for i := range l.shard {
		l.shard[i] = shard{index: map[uint64]int32{}, max: per, head: -1, tail: -1}
	}
	return l
}

// Spec returns the settings l enforces.
func (l *Local) Spec() Spec { return l.spec }

// Take takes a token from key's bucket.
func (l *Local) Take(key uint64, now time.Duration) Decision {
	// The low bits pick a shard; the map hashes the whole key again.
	sh := &l.shard[key%shards]
	sh.mu.Lock()
	i, ok := sh.index[key]
	if !ok {
		i = sh.insert(key)
	} else {
		sh.touch(i)
	}
	s := &sh.slots[i]
	tat, d := l.g.take(time.Duration(s.tat), now)
	s.tat = int64(tat)
	sh.mu.Unlock()
	return d
}

// Len returns the keys l holds.
func (l *Local) Len() int {
	n := 0
	for i := range l.shard {
		sh := &l.shard[i]
		sh.mu.Lock()
		n += len(sh.index)
		sh.mu.Unlock()
	}
	return n
}

// insert gives key a slot with a full bucket at the front of the list,
// taking the least recently used key's when the shard is full.
func (sh *shard) insert(key uint64) int32 {
	var i int32
	if len(sh.slots) < sh.max {
		i = int32(len(sh.slots))
		sh.slots = append(sh.slots, slot{})
	} else {
		i = sh.tail
		delete(sh.index, sh.slots[i].key)
		sh.unlink(i)
	}
	sh.slots[i] = slot{key: key, prev: -1, next: -1}
	sh.index[key] = i
	sh.pushFront(i)
	return i
}

// touch moves slot i to the front of the list.
func (sh *shard) touch(i int32) {
	if sh.head == i {
		return
	}
	sh.unlink(i)
	sh.pushFront(i)
}

func (sh *shard) unlink(i int32) {
	s := &sh.slots[i]
	if s.prev >= 0 {
		sh.slots[s.prev].next = s.next
	} else {
		sh.head = s.next
	}
	if s.next >= 0 {
		sh.slots[s.next].prev = s.prev
	} else {
		sh.tail = s.prev
	}
	s.prev, s.next = -1, -1
}

func (sh *shard) pushFront(i int32) {
	s := &sh.slots[i]
	s.prev, s.next = -1, sh.head
	if sh.head >= 0 {
		sh.slots[sh.head].prev = i
	}
	sh.head = i
	if sh.tail < 0 {
		sh.tail = i
	}
}
