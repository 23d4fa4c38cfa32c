package ratelimit

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
)

// keyOf is the key of a test's n-th client: an IPv4 address, as the core
// makes it.
func keyOf(n uint32) uint64 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	return HashAddr(netip.AddrFrom4(b))
}

// limiters are the implementations every bucket test runs on.
func limiters(s Spec) map[string]Limiter {
	return map[string]Limiter{"local": NewLocal(s, 0), "one": NewOne(s)}
}

// TestBurstThenRate: a full bucket lets burst requests through at once,
// refuses the next with the wait for one token, and then lets one
// through per 1/rate.
func TestBurstThenRate(t *testing.T) {
	for name, l := range limiters(Spec{Rate: 10, Burst: 5}) {
		t.Run(name, func(t *testing.T) {
			now := 10 * time.Second
			for i := range 5 {
				d := l.Take(7, now)
				if !d.Allowed || d.Remaining != 4-i || d.Wait != 0 {
					t.Fatalf("request %d: %+v, want allowed with %d remaining", i, d, 4-i)
				}
			}
			d := l.Take(7, now)
			if d.Allowed || d.Wait != 100*time.Millisecond || d.Remaining != 0 {
				t.Fatalf("request 6: %+v, want refused, a token in 100ms", d)
			}
			if d := l.Take(7, now+60*time.Millisecond); d.Allowed || d.Wait != 40*time.Millisecond {
				t.Fatalf("60ms later: %+v, want refused, a token in 40ms", d)
			}
			if d := l.Take(7, now+100*time.Millisecond); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("100ms later: %+v, want allowed", d)
			}
			// Idle for longer than burst/rate: full again, never fuller.
			later := now + 10*time.Second
			for i := range 5 {
				if d := l.Take(7, later); !d.Allowed {
					t.Fatalf("after idling, request %d refused", i)
				}
			}
			if d := l.Take(7, later); d.Allowed {
				t.Fatal("after idling, the bucket held more than burst")
			}
		})
	}
}

// TestRateOverTime: a key sending far over its rate for 10 s gets burst
// plus rate times 10 s through, exactly.
func TestRateOverTime(t *testing.T) {
	for name, l := range limiters(Spec{Rate: 50, Burst: 20}) {
		t.Run(name, func(t *testing.T) {
			allowed := 0
			start := time.Second
			for now := start; now < start+10*time.Second; now += time.Millisecond {
				if l.Take(1, now).Allowed {
					allowed++
				}
			}
			// The last token arrives at 9.98 s and the first 20 are the burst.
			if want := 20 + 50*10 - 1; allowed != want {
				t.Errorf("%d requests allowed in 10 s, want %d", allowed, want)
			}
		})
	}
}

// TestKeysApart: one key's empty bucket leaves another's full.
func TestKeysApart(t *testing.T) {
	l := NewLocal(Spec{Rate: 1, Burst: 2}, 0)
	a, b := keyOf(1), keyOf(2)
	l.Take(a, 0)
	l.Take(a, 0)
	if l.Take(a, 0).Allowed {
		t.Fatal("a is over its burst")
	}
	if d := l.Take(b, 0); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("b: %+v, want a full bucket", d)
	}
}

// TestTableBounded: with more keys than it may hold, the table keeps
// MaxKeys, evicts the least recently used, and an evicted key comes back
// with a full bucket.
func TestTableBounded(t *testing.T) {
	const maxKeys = shards * 4
	l := NewLocal(Spec{Rate: 1, Burst: 1}, maxKeys)
	// Key 0 empties its bucket, then 100 times the table's size of other
	// keys pass while key 0 is kept recent.
	hot := keyOf(0)
	l.Take(hot, 0)
	for n := uint32(1); n <= 100*maxKeys; n++ {
		l.Take(keyOf(n), 0)
		if n%8 == 0 && l.Take(hot, 0).Allowed {
			t.Fatalf("the recently used key lost its bucket after %d others", n)
		}
	}
	if n := l.Len(); n > maxKeys {
		t.Fatalf("table holds %d keys, more than %d", n, maxKeys)
	}
	// Key 1 was used once, long ago: evicted, it returns full (lenient).
	if d := l.Take(keyOf(1), 0); !d.Allowed {
		t.Fatalf("an evicted key came back with an empty bucket: %+v", d)
	}
}

// TestOneConcurrent: at one instant, many goroutines share exactly burst
// tokens of the single bucket.
func TestOneConcurrent(t *testing.T) {
	for name, l := range limiters(Spec{Rate: 1, Burst: 1000}) {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			allowed := 0
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n := 0
					for range 500 {
						if l.Take(3, time.Second).Allowed {
							n++
						}
					}
					mu.Lock()
					allowed += n
					mu.Unlock()
				}()
			}
			wg.Wait()
			if allowed != 1000 {
				t.Errorf("%d allowed, want the burst, 1000", allowed)
			}
		})
	}
}

// TestTakeAllocatesNothing: a key the table holds, and the single
// bucket, cost no allocation.
func TestTakeAllocatesNothing(t *testing.T) {
	for name, l := range limiters(Spec{Rate: 1e6, Burst: 1e6}) {
		k := keyOf(9)
		l.Take(k, 0)
		if n := testing.AllocsPerRun(1000, func() { l.Take(k, time.Millisecond) }); n != 0 {
			t.Errorf("%s: %v allocations a request", name, n)
		}
	}
	a := netip.MustParseAddr("192.0.2.7")
	if n := testing.AllocsPerRun(1000, func() { HashAddr(a); HashBytes([]byte("key")) }); n != 0 {
		t.Errorf("hashing a key: %v allocations", n)
	}
}

// BenchmarkLocalMillion measures the table under 1,000,000 distinct
// client addresses (then 1,000,000 more, which evict the first): the heap
// it takes, per key and in all.
func BenchmarkLocalMillion(b *testing.B) {
	const clients = 1_000_000
	for range b.N {
		var before, after, full runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l := NewLocal(Spec{Rate: 10, Burst: 20}, DefaultMaxKeys)
		for n := range uint32(clients) {
			l.Take(keyOf(n), time.Duration(n))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		for n := range uint32(clients) {
			l.Take(keyOf(clients+n), time.Duration(clients+n))
		}
		runtime.GC()
		runtime.ReadMemStats(&full)
		keys := l.Len()
		used := float64(after.HeapAlloc - before.HeapAlloc)
		b.ReportMetric(used/clients, "bytes/key")
		b.ReportMetric(used/(1<<20), "MiB@1M")
		b.ReportMetric(float64(full.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB@2M")
		b.ReportMetric(float64(keys), "keys@2M")
		runtime.KeepAlive(l)
	}
}
