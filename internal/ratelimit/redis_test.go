package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"relay/internal/redistest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newStore makes a store over addr for t, closed when t ends.
func newStore(t testing.TB, addr string, log *logLines) *Redis {
	o := RedisOptions{Address: addr, Timeout: testTimeout}
	if log != nil {
		o.Logger = slog.New(log)
	}
	r := NewRedis(o)
	t.Cleanup(func() { r.Close() })
	return r
}

// testTimeout is the wait for Redis of the tests' stores: long enough that
// a Redis that is up answers in time however loaded the machine (the race
// detector, other packages' tests), so that only a Redis that is down
// counts as down; tests of the timeout itself set their own.
const testTimeout = time.Second

// TestRedisBurstThenRate: over Redis, a full bucket lets burst requests
// through, refuses the next with the wait for one token, and lets one
// through once that wait has passed; the bucket's key is the prefix's,
// and expires when the bucket is full again.
func TestRedisBurstThenRate(t *testing.T) {
	srv := redistest.Start(t)
	r := NewRedis(RedisOptions{Address: srv.Addr(), Prefix: "burst:"})
	t.Cleanup(func() { r.Close() })
	l := r.Limit("burst", Spec{Rate: 10, Burst: 5}, FailClosed)
	k := []byte("client")
	allowed := 0
	start := time.Now()
	var d Decision
	for range 100 {
		if d = l.Take(k, time.Now()); !d.Allowed {
			break
		}
		allowed++
	}
	elapsed := time.Since(start)
	// A token comes every 100ms: one more may have come meanwhile.
	if max := 5 + int(elapsed/(100*time.Millisecond)); allowed < 5 || allowed > max {
		t.Fatalf("%d allowed in %v, want 5 to %d", allowed, elapsed, max)
	}
	if d.Allowed || d.Wait <= 0 || d.Wait > 100*time.Millisecond {
		t.Fatalf("after the burst: %+v, want refused with a wait of at most 100ms", d)
	}
	c := srv.Client()
	ttl, err := c.PTTL(context.Background(), redisKey("burst:", "burst", k)).Result()
	if err != nil || ttl <= 0 || ttl > 500*time.Millisecond {
		t.Fatalf("the bucket's key expires in %v (%v), want within burst/rate, 500ms", ttl, err)
	}
	time.Sleep(d.Wait)
	if d := l.Take(k, time.Now()); !d.Allowed {
		t.Fatalf("after the wait: %+v, want allowed", d)
	}
	eventually(t, 2*time.Second, "the bucket's key expires", func() bool {
		n, err := c.Exists(context.Background(), redisKey("burst:", "burst", k)).Result()
		return err == nil && n == 0
	})
}

// TestRedisThreeInstances: three stores over one Redis, as three relay
// instances, each with goroutines taking from one key far over its rate
// for 10 s, let through burst + rate*10s within 10% in all, and none
// is starved; the same for a limit's single bucket (key nil).
func TestRedisThreeInstances(t *testing.T) {
	srv := redistest.Start(t)
	const rate, burst = 100, 50
	const window = 10 * time.Second
	const instances, workers = 3, 3
	want := burst + rate*int(window/time.Second)
	var byKey, byRoute [instances]atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(window)
	for i := range instances {
		r := newStore(t, srv.Addr(), nil)
		perClient := r.Limit("three:client", Spec{Rate: rate, Burst: burst}, FailClosed)
		perRoute := r.Limit("three:route", Spec{Rate: rate, Burst: burst}, FailClosed)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := []byte("203.0.113.9")
				for n := 0; n < 100_000_000; n++ {
					now := time.Now()
					if now.After(stop) {
						return
					}
					if perClient.Take(k, now).Allowed {
						byKey[i].Add(1)
					}
					if perRoute.Take(nil, now).Allowed {
						byRoute[i].Add(1)
					}
					// About 9,000 takes a second in all, 90 times the
					// rate, without taking both cores from the tests
					// that run beside this one.
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	for name, counts := range map[string]*[instances]atomic.Int64{"key": &byKey, "nil key": &byRoute} {
		total := 0
		var each [instances]int64
		for i := range counts {
			each[i] = counts[i].Load()
			total += int(each[i])
			if each[i] == 0 {
				t.Errorf("%s: instance %d let nothing through", name, i)
			}
		}
		t.Logf("%s: %d allowed in %v (instances %v), want %d within 10%%", name, total, window, each, want)
		if diff := total - want; diff > want/10 || -diff > want/10 {
			t.Errorf("%s: %d allowed, want %d within 10%%", name, total, want)
		}
	}
}

// TestRedisRefusesLocally: a client over its rate is refused without a
// round trip each: Redis runs the script about once per token, however
// many requests are refused.
func TestRedisRefusesLocally(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	r := newStore(t, srv.Addr(), nil)
	l := r.Limit("local", Spec{Rate: 100, Burst: 10}, FailClosed)
	k := addrKey(7)
	allowed, refused := 0, 0
	stop := time.Now().Add(time.Second)
	for n := 0; n < 5_000_000 && time.Now().Before(stop); n++ {
		if l.Take(k, time.Now()).Allowed {
			allowed++
		} else {
			refused++
		}
	}
	calls := redistest.ScriptCalls(t, c)
	t.Logf("1s: %d allowed, %d refused, %d script runs", allowed, refused, calls)
	if allowed < 10 || allowed > 10+100*12/10 {
		t.Errorf("%d allowed in 1s, want about burst + rate, 110", allowed)
	}
	// A token of lease size 1 costs a run that grants it and at most one
	// that finds the bucket empty.
	if calls > 2*allowed+10 {
		t.Errorf("%d script runs for %d allowed, want at most 2 a token", calls, allowed)
	}
	if refused < 10*calls {
		t.Errorf("%d refused for %d script runs: refusals are not local", refused, calls)
	}
}

// load takes tokens from l for 64 clients, one every 100µs, until stop is
// closed, as clients over their rate would: Redis has some of their
// fetches in flight at any time.
func load(wg *sync.WaitGroup, l Limiter, stop chan struct{}) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; n < 10_000_000; n++ {
			select {
			case <-stop:
				return
			default:
			}
			l.Take(addrKey(uint32(n%64)), time.Now())
			time.Sleep(100 * time.Microsecond)
		}
	}()
}

// TestRedisDownAndBack: Redis stopped under load: a limit that fails open
// lets every request through, one that fails closed refuses them with a
// wait of 1s, and each store logs it once; Redis started again: the
// limits hold again within a few seconds, each store saying so once.
func TestRedisDownAndBack(t *testing.T) {
	srv := redistest.Start(t)
	openLog, closedLog := &logLines{}, &logLines{}
	spec := Spec{Rate: 50, Burst: 10}
	openStore, shutStore := newStore(t, srv.Addr(), openLog), newStore(t, srv.Addr(), closedLog)
	open := openStore.Limit("down:open", spec, FailOpen)
	shut := shutStore.Limit("down:closed", spec, FailClosed)
	k := addrKey(1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for range 2 {
		load(&wg, open, stop)
		load(&wg, shut, stop)
	}
	limited := func(l Limiter) func() bool {
		return func() bool { return !l.Take(k, time.Now()).Allowed }
	}
	eventually(t, 2*time.Second, "the key is limited", func() bool { return limited(open)() && limited(shut)() })

	srv.Stop()
	eventually(t, 3*time.Second, "both stores see Redis down", func() bool {
		return openLog.count("rate limit store unreachable") > 0 && closedLog.count("rate limit store unreachable") > 0
	})
	// Once any lease and the last refusal are spent, requests get the
	// limit's failure answer, without waiting for Redis.
	eventually(t, time.Second, "fail open allows", func() bool {
		for range 100 {
			if !open.Take(k, time.Now()).Allowed {
				return false
			}
		}
		return true
	})
	eventually(t, time.Second, "fail closed refuses", func() bool {
		d := shut.Take(k, time.Now())
		return !d.Allowed && d.Wait == time.Second
	})
	// Under load for a few probes more, each answered at once: no
	// request asks Redis for a lease, so none waits for it.
	fetched := openStore.fetches.Load() + shutStore.fetches.Load()
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		start := time.Now()
		if d := open.Take(k, start); !d.Allowed {
			t.Fatalf("fail open while down: %+v", d)
		}
		if d := shut.Take(k, start); d.Allowed || d.Wait != time.Second {
			t.Fatalf("fail closed while down: %+v", d)
		}
	}
	if n := openStore.fetches.Load() + shutStore.fetches.Load() - fetched; n != 0 {
		t.Fatalf("%d leases were fetched while Redis was down: requests waited for it", n)
	}

	srv.Start()
	back := time.Now()
	eventually(t, 5*time.Second, "both stores see Redis back", func() bool {
		return openLog.count("rate limit store reachable again") > 0 && closedLog.count("rate limit store reachable again") > 0
	})
	eventually(t, 5*time.Second, "fail open limits again", limited(open))
	eventually(t, 5*time.Second, "fail closed allows again", func() bool { return shut.Take(k, time.Now()).Allowed })
	t.Logf("limited again %v after Redis started", time.Since(back))
	// And stays up under load.
	time.Sleep(1500 * time.Millisecond)
	for name, log := range map[string]*logLines{"open": openLog, "closed": closedLog} {
		if log.count("rate limit store unreachable") != 1 || log.count("rate limit store reachable again") != 1 {
			t.Errorf("store failing %s logged:\n%s\nwant one line each for down and back", name, log)
		}
	}
	t.Logf("fail open logged:\n%s", openLog)
}

// TestRedisDownAtStart: a store made while Redis is down answers as its
// limits' Failure says, and limits once Redis starts, by itself.
func TestRedisDownAtStart(t *testing.T) {
	srv := redistest.At(t, redistest.FreeAddr(t))
	addr := srv.Addr()
	log := &logLines{}
	r := newStore(t, addr, log)
	l := r.Limit("start", Spec{Rate: 1, Burst: 1}, FailClosed)
	k := []byte("k")
	start := time.Now()
	if d := l.Take(k, start); d.Allowed || d.Wait != time.Second {
		t.Fatalf("Redis down: %+v, want refused with a wait of 1s", d)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the first take took %v, want at most the timeout and a dial", took)
	}
	eventually(t, time.Second, "the store logs Redis down", func() bool { return log.count("rate limit store unreachable") == 1 })

	srv.Start()
	eventually(t, 5*time.Second, "the limit answers from Redis", func() bool { return l.Take(k, time.Now()).Allowed })
	if d := l.Take(k, time.Now()); d.Allowed {
		t.Fatalf("the second take in a bucket of 1: %+v, want refused", d)
	}
	if log.count("rate limit store unreachable") != 1 || log.count("rate limit store reachable again") != 1 {
		t.Fatalf("logged:\n%s\nwant one line each for down and back", log)
	}
}

// TestRedisLeasesBounded: the lease table stays within its bound under
// 131,072 distinct clients, each a round trip to a real Redis (twice the
// table; a million would take minutes under the race detector), and Redis
// forgets their buckets once full again.
func TestRedisLeasesBounded(t *testing.T) {
	srv := redistest.Start(t)
	// The bound is the point here, not the round trip's time: a timeout
	// of a second keeps a loaded machine (or the race detector) from
	// marking the store down.
	log := &logLines{}
	r := NewRedis(RedisOptions{Address: srv.Addr(), Timeout: time.Second, Logger: slog.New(log)})
	defer r.Close()
	l := r.Limit("many", Spec{Rate: 1000, Burst: 10}, FailClosed)
	const clients, workers = 2 * redisLeases, 16
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var refused atomic.Int64
	var next atomic.Uint32
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > clients {
					return
				}
				if !l.Take(addrKey(n), time.Now()).Allowed {
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := r.leases.len()
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d clients in %v (%.0f/s), %d refused, %d leases held, heap grew %d KiB",
		clients, took, clients/took.Seconds(), refused.Load(), held, grew/1024)
	if held > redisLeases {
		t.Fatalf("%d leases held, want at most %d", held, redisLeases)
	}
	if grew > 64<<20 {
		t.Fatalf("heap grew %d MiB", grew>>20)
	}
	if refused.Load() > 0 {
		t.Fatalf("%d of %d new clients refused; logged:\n%s", refused.Load(), clients, log)
	}
	c := srv.Client()
	eventually(t, 20*time.Second, "Redis expires the buckets", func() bool {
		n, err := c.DBSize(context.Background()).Result()
		return err == nil && n < 1000
	})
}

// TestRedisTakeDoesNotAllocate: a take from a lease allocates nothing.
func TestRedisTakeDoesNotAllocate(t *testing.T) {
	srv := redistest.Start(t)
	r := newStore(t, srv.Addr(), nil)
	l := r.Limit("alloc", Spec{Rate: 1_000_000_000, Burst: 1_000_000_000}, FailClosed)
	k := addrKey(3)
	if !l.Take(k, time.Now()).Allowed {
		t.Fatal("the first take was refused")
	}
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() { l.Take(k, now) }); n != 0 {
		t.Fatalf("a leased take allocates %v times", n)
	}
}

// TestRedisCloseStopsGoroutines: Close ends every goroutine the store
// started, with Redis up and with Redis down (the prober running).
func TestRedisCloseStopsGoroutines(t *testing.T) {
	srv := redistest.Start(t)
	for _, addr := range []string{srv.Addr(), redistest.FreeAddr(t)} {
		before := runtime.NumGoroutine()
		r := NewRedis(RedisOptions{Address: addr})
		l := r.Limit("close", Spec{Rate: 10, Burst: 10}, FailOpen)
		for i := range 100 {
			l.Take(addrKey(uint32(i)), time.Now())
		}
		if err := r.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		if d := l.Take(addrKey(1000), time.Now()); !d.Allowed {
			t.Fatalf("a take after Close: %+v, want the failure answer, allowed", d)
		}
		eventually(t, 3*time.Second, fmt.Sprintf("goroutines back to %d after Close (%s)", before, addr), func() bool {
			return runtime.NumGoroutine() <= before
		})
	}
}

// BenchmarkRedisTake: a take from a lease, without I/O; a take that
// waits for a round trip (a new key each time); and the round trip alone,
// the script run from the benchmark's goroutine.
func BenchmarkRedisTake(b *testing.B) {
	srv := redistest.Start(b)
	r := newStore(b, srv.Addr(), nil)
	b.Run("leased", func(b *testing.B) {
		l := r.Limit("bench:leased", Spec{Rate: 1_000_000_000, Burst: 1_000_000_000}, FailClosed)
		k := addrKey(1)
		l.Take(k, time.Now())
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			l.Take(k, time.Now())
		}
	})
	b.Run("round-trip", func(b *testing.B) {
		l := r.Limit("bench:trip", Spec{Rate: 10, Burst: 10}, FailClosed)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if !l.Take(addrKey(uint32(i)), time.Now()).Allowed {
				b.Fatal("refused")
			}
		}
	})
	b.Run("script", func(b *testing.B) {
		l := r.Limit("bench:script", Spec{Rate: 1_000_000_000, Burst: 1_000_000_000}, FailClosed).(*redisLimit)
		keys := []string{redisKey(r.prefix, l.name, nil)}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := takeScript.Run(ctx, r.client, keys, l.args...).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
