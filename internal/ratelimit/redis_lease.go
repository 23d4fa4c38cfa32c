package ratelimit

import (
	"bytes"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// redisLeases is the keys a store keeps leases for at most: 2^16
	// clients active at once, in about 12 MiB (a lease is under 200
	// bytes with its key and its Redis key's name). A key beyond takes
	// the place of the least recently used of the eight in its set; see
	// leaseTable for what that costs.
	redisLeases = 1 << 16
	leaseWays   = 8
	// leaseLife is how long leased tokens stay usable. A client at its
	// rate spends a lease (at most a twentieth of its rate) in 50ms, so
	// only a client sending under a twentieth of its rate ever sees one
	// expire, and pays a round trip for it. What expiry bounds is the
	// tokens a process holds for a client that went elsewhere (to
	// another instance, or away): they are tokens Redis has handed out,
	// so they cost that client at most a lease for at most a second, and
	// they cannot be spent later on top of a bucket that filled again
	// meanwhile, which would let a returning client exceed its burst by
	// a lease.
	leaseLife = time.Second
)

// redisLimit is one limit over a Redis store.
type redisLimit struct {
	r    *Redis
	name string
	spec Spec
	fail Failure
	// local takes the tokens while Redis cannot give them, with FailLocal.
	local Limiter
	id    uint64 // name's hash, mixed into its keys' hashes
	// size is the tokens asked of Redis at once, L = max(1, min(Burst,
	// Rate)/20). Tokens are only ever taken from Redis's bucket, so a
	// lease never lets more through than the bucket holds; what a lease
	// costs is tokens leased and not used (at most L + low a process,
	// per key), which are refused to the client meanwhile. With n
	// instances, that is under n*1.25*min(Burst,Rate)/20 tokens, and
	// 10% of the tokens a 10 s window allows, Burst + 10*Rate, is at
	// least 1.1*min(Burst,Rate): so up to 17 instances stay within the
	// 10% bound, while a client at its rate makes Redis answer at most
	// 20 times a second, whatever the rate.
	size int64
	// low is when a lease is refilled: when a take leaves that many
	// tokens or fewer, a fetch starts in the background, so a client
	// at its rate finds the next lease there.
	low  int64
	args []any // the script's ARGV
}

func newRedisLimit(r *Redis, name string, s Spec, f Failure) *redisLimit {
	size := max(1, min(s.Burst, s.Rate)/20)
	iv := 1e6 / float64(s.Rate)
	return &redisLimit{
		r: r, name: name, spec: s, fail: f,
		id:   seededHash(r.seed, 0, []byte(name)),
		size: int64(size),
		low:  int64(size / 4),
		args: []any{strconv.FormatFloat(iv, 'g', -1, 64), s.Burst, size},
	}
}

func (l *redisLimit) Spec() Spec { return l.spec }

// Take takes a leased token when key has one, without I/O; refuses
// without I/O when Redis said the bucket holds none until later; and
// otherwise waits for a lease, at most the store's Timeout.
func (l *redisLimit) Take(key []byte, now time.Time) Decision {
	r := l.r
	t := r.mono(now)
	e := r.findLease(l, key, t)
	var timer *time.Timer
	for {
		e.mu.Lock()
		if d, ok := l.takeLeased(e, t); ok {
			e.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return d
		}
		var done chan struct{}
		if l.refill(e) {
			// Join the fetch in flight, or the one just queued.
			if e.done == nil {
				e.done = make(chan struct{})
			}
			done = e.done
		}
		e.mu.Unlock()
		if done == nil {
			// The store is down, closed, or too far behind to take one
			// more fetch: no request waits for it.
			if timer != nil {
				timer.Stop()
			}
			if !r.down.Load() && !r.closed.Load() {
				r.overflowed() // too far behind
			}
			return l.failed(key, now)
		}
		if timer == nil {
			timer = time.NewTimer(r.timeout)
		}
		select {
		case <-done:
			t = r.mono(time.Now())
		case <-timer.C:
			// The fetch will fail at its own timeout and mark the
			// store down; this request has waited long enough.
			return l.failed(key, time.Now())
		}
	}
}

// takeLeased answers from e alone, under e.mu: a leased token, or a
// refusal until the time Redis said; ok is false when e has neither and
// Redis must be asked.
func (l *redisLimit) takeLeased(e *lease, t int64) (d Decision, ok bool) {
	if e.tokens > 0 && t >= e.expires {
		e.tokens = 0
	}
	if e.tokens > 0 {
		e.tokens--
		if e.tokens <= l.low && t >= e.until {
			l.refill(e)
		}
		// What the client may still send: its lease and what the bucket
		// held at the last answer, which other instances may have taken
		// since; it is a hint for RateLimit's remaining.
		return Decision{Allowed: true, Remaining: int(min(e.tokens+e.remaining, int64(l.spec.Burst-1)))}, true
	}
	if t < e.until {
		return Decision{Wait: time.Duration(e.until - t)}, true
	}
	return d, false
}

// refill queues a fetch of e's lease unless one is in flight, under
// e.mu, and reports whether a fetch is coming. Sending a pointer on the
// queue does not allocate, so a take that starts a refill does not.
func (l *redisLimit) refill(e *lease) bool {
	// Down or closed first: no request joins a fetch that will fail,
	// nor one queued as the store closed, which no fetcher will take.
	r := l.r
	if r.down.Load() || r.closed.Load() {
		return false
	}
	if e.fetching {
		return true
	}
	e.fetching = true
	select {
	case r.queue <- e:
		return true
	default:
		e.fetching = false
		return false
	}
}

// failed is the answer while the store cannot give one. A request let
// through is told a full bucket's remainder: the limit is not in force,
// and a client that reads RateLimit should not slow down for it.
func (l *redisLimit) failed(key []byte, now time.Time) Decision {
	switch l.fail {
	case FailClosed:
		return Decision{Wait: failedWait}
	case FailLocal:
		return l.local.Take(key, now)
	}
	return Decision{Allowed: true, Remaining: l.spec.Burst - 1}
}

// A lease is one key's tokens leased from its bucket in Redis, and what
// Redis last said of the bucket.
type lease struct {
	limit *redisLimit
	h     uint64
	key   []byte
	keys  []string     // the bucket's Redis key, as the script's KEYS
	used  atomic.Int64 // the last take, for the table's eviction

	mu        sync.Mutex
	tokens    int64 // leased and not yet taken
	expires   int64 // when tokens are dropped
	until     int64 // the bucket holds no token before this
	remaining int64 // the tokens the bucket held at the last answer
	fetching  bool  // a fetch is queued or in flight
	// done is closed when the fetch in flight ends; made by the first
	// request that waits for it, so a refill in the background makes
	// nothing.
	done chan struct{}
}

// fetched records a fetch's answer: g tokens granted and rem left in the
// bucket, or none before wait has passed, at the store's time now; or the
// fetch's error, which changes nothing.
func (e *lease) fetched(g, rem int64, wait time.Duration, now int64, err error) {
	e.mu.Lock()
	if err == nil {
		if g > 0 {
			e.tokens += g
			e.expires = now + int64(leaseLife)
			e.until = 0
		} else {
			e.until = now + int64(wait)
		}
		e.remaining = rem
	}
	e.fetching = false
	if e.done != nil {
		close(e.done)
		e.done = nil
	}
	e.mu.Unlock()
}

// A leaseTable is a store's leases, in sets of leaseWays: a key hashes
// (with the store's secret seed, so clients cannot crowd one set) to a
// set, and is found there without a lock. A new key takes an empty way
// or the least recently used one, under the set's lock.
//
// An evicted key loses its lease and what Redis last said of it: the
// tokens leased are never used (the client is refused nothing it was
// owed beyond them, and they stop counting in a second), its next
// request waits for a round trip, and a client over its rate costs one
// round trip to be refused again. Redis keeps its bucket, so eviction
// never lets a client through that the limit would refuse.
type leaseTable struct {
	sets []leaseSet
}

type leaseSet struct {
	mu   sync.Mutex
	ways [leaseWays]atomic.Pointer[lease]
}

func newLeaseTable(keys int) *leaseTable {
	return &leaseTable{sets: make([]leaseSet, (keys+leaseWays-1)/leaseWays)}
}

// len returns the leases the table holds.
func (t *leaseTable) len() int {
	n := 0
	for i := range t.sets {
		for w := range leaseWays {
			if t.sets[i].ways[w].Load() != nil {
				n++
			}
		}
	}
	return n
}

// findLease returns l's lease for key, making it if the table has none.
func (r *Redis) findLease(l *redisLimit, key []byte, t int64) *lease {
	h := seededHash(r.seed, l.id, key)
	hi, _ := bits.Mul64(h, uint64(len(r.leases.sets)))
	s := &r.leases.sets[hi]
	for w := range leaseWays {
		if e := s.ways[w].Load(); e != nil && e.h == h && e.limit == l && bytes.Equal(e.key, key) {
			e.used.Store(t)
			return e
		}
	}
	return r.newLease(s, l, h, key, t)
}

// newLease gives key a way of s.
func (r *Redis) newLease(s *leaseSet, l *redisLimit, h uint64, key []byte, t int64) *lease {
	e := &lease{limit: l, h: h, key: bytes.Clone(key),
		keys: []string{redisKey(r.prefix, l.name, key)}}
	e.used.Store(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	victim, oldest := 0, int64(1<<63-1)
	for w := range leaseWays {
		old := s.ways[w].Load()
		if old == nil {
			victim, oldest = w, -1<<63
			continue
		}
		if old.h == h && old.limit == l && bytes.Equal(old.key, key) {
			return old // made meanwhile by another request
		}
		if u := old.used.Load(); u < oldest {
			victim, oldest = w, u
		}
	}
	s.ways[victim].Store(e)
	return e
}
