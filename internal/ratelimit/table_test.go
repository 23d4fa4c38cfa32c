package ratelimit

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// addrKey is the key of a test's n-th client: an IPv4 address in the
// 16-byte form the core hands limiters.
func addrKey(n uint32) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	a := netip.AddrFrom4(b).As16()
	return a[:]
}

// at is a time the tests' takes happen at: d after a fixed instant.
var epoch = time.Now()

func at(d time.Duration) time.Time { return epoch.Add(d) }

// limiters are the limits every bucket test runs on: a key's bucket in a
// table of the process's memory, and in a shared table.
func limiters(t *testing.T, s Spec) map[string]Limiter {
	shared := sharedTable(t, 1000)
	return map[string]Limiter{"memory": NewTable(1000).Limit("test", s), "shared": shared.Limit("test", s)}
}

// sharedTable makes a shared table and maps it.
func sharedTable(t testing.TB, keys int) *Table {
	t.Helper()
	f, err := CreateShared(keys)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tb, err := OpenShared(f)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestBurstThenRate: a full bucket lets burst requests through at once,
// refuses the next with the wait for one token, and then lets one
// through per 1/rate.
func TestBurstThenRate(t *testing.T) {
	for name, l := range limiters(t, Spec{Rate: 10, Burst: 5}) {
		t.Run(name, func(t *testing.T) {
			k := []byte("client")
			now := 10 * time.Second
			for i := range 5 {
				d := l.Take(k, at(now))
				if !d.Allowed || d.Remaining != 4-i || d.Wait != 0 {
					t.Fatalf("request %d: %+v, want allowed with %d remaining", i, d, 4-i)
				}
			}
			d := l.Take(k, at(now))
			if d.Allowed || d.Wait != 100*time.Millisecond || d.Remaining != 0 {
				t.Fatalf("request 6: %+v, want refused, a token in 100ms", d)
			}
			if d := l.Take(k, at(now+60*time.Millisecond)); d.Allowed || d.Wait != 40*time.Millisecond {
				t.Fatalf("60ms later: %+v, want refused, a token in 40ms", d)
			}
			if d := l.Take(k, at(now+100*time.Millisecond)); !d.Allowed || d.Remaining != 0 {
				t.Fatalf("100ms later: %+v, want allowed", d)
			}
			// Idle for longer than burst/rate: full again, never fuller.
			later := now + 10*time.Second
			for i := range 5 {
				if d := l.Take(k, at(later)); !d.Allowed {
					t.Fatalf("after idling, request %d refused", i)
				}
			}
			if d := l.Take(k, at(later)); d.Allowed {
				t.Fatal("after idling, the bucket held more than burst")
			}
		})
	}
}

// TestRateOverTime: a key sending far over its rate for 10 s gets burst
// plus rate times 10 s through, exactly.
func TestRateOverTime(t *testing.T) {
	for name, l := range limiters(t, Spec{Rate: 50, Burst: 20}) {
		t.Run(name, func(t *testing.T) {
			allowed := 0
			start := time.Second
			for now := start; now < start+10*time.Second; now += time.Millisecond {
				if l.Take(nil, at(now)).Allowed {
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

// TestKeysApart: one key's empty bucket leaves another's full, and two
// limits of one table keep their buckets apart.
func TestKeysApart(t *testing.T) {
	tb := NewTable(1000)
	l := tb.Limit("one", Spec{Rate: 1, Burst: 2})
	a, b := addrKey(1), addrKey(2)
	l.Take(a, at(0))
	l.Take(a, at(0))
	if l.Take(a, at(0)).Allowed {
		t.Fatal("a is over its burst")
	}
	if d := l.Take(b, at(0)); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("b: %+v, want a full bucket", d)
	}
	if d := tb.Limit("two", Spec{Rate: 1, Burst: 2}).Take(a, at(0)); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("a under another limit: %+v, want a full bucket", d)
	}
	if d := tb.Limit("one", Spec{Rate: 1, Burst: 2}).Take(a, at(0)); d.Allowed {
		t.Fatalf("a under a limit of the same name: %+v, want its empty bucket", d)
	}
}

// TestIdleBucketsGiveWayFirst: in a full set, a new key takes the slot
// of a bucket that refilled, so a limited client keeps its empty bucket;
// only when every bucket is still refilling is one evicted, the fullest.
func TestIdleBucketsGiveWayFirst(t *testing.T) {
	tb := NewTable(ways) // one set
	l := tb.Limit("slow", Spec{Rate: 1, Burst: 1})
	fast := tb.Limit("fast", Spec{Rate: 1000, Burst: 1})
	limited := addrKey(0)
	l.Take(limited, at(0))
	// Other keys pass, each once, 1 ms apart under a limit that refills
	// in 1 ms: each has refilled when the next comes, and the limited
	// key's bucket refills only at 1 s.
	for n := uint32(1); n <= 100; n++ {
		fast.Take(addrKey(n), at(time.Duration(n)*time.Millisecond))
		if d := l.Take(limited, at(time.Duration(n)*time.Millisecond)); d.Allowed {
			t.Fatalf("the limited key lost its bucket after %d other keys", n)
		}
	}
	if n := tb.Len(); n != ways {
		t.Fatalf("table holds %d keys, want %d", n, ways)
	}
	// Now ways keys empty their buckets at once: the set is all
	// refilling and the limited key, the oldest, is evicted.
	for n := uint32(200); n < 200+ways; n++ {
		l.Take(addrKey(n), at(200*time.Millisecond))
	}
	if d := l.Take(limited, at(200*time.Millisecond)); !d.Allowed {
		t.Fatalf("an evicted key came back with an empty bucket: %+v", d)
	}
}

// TestConcurrentTakes: at one instant, many goroutines share exactly
// burst tokens of a key, through its slot and the insertion race.
func TestConcurrentTakes(t *testing.T) {
	for name, l := range limiters(t, Spec{Rate: 1, Burst: 1000}) {
		t.Run(name, func(t *testing.T) {
			var wg sync.WaitGroup
			var mu sync.Mutex
			allowed := 0
			for range 8 {
				wg.Go(func() {
					n := 0
					for range 500 {
						if l.Take([]byte("k"), at(time.Second)).Allowed {
							n++
						}
					}
					mu.Lock()
					allowed += n
					mu.Unlock()
				})
			}
			wg.Wait()
			if allowed != 1000 {
				t.Errorf("%d allowed, want the burst, 1000", allowed)
			}
		})
	}
}

// TestSharedAcrossProcesses: four processes taking from one key of a
// shared table at the same instant get exactly its burst between them,
// and a key one process emptied is empty for another.
func TestSharedAcrossProcesses(t *testing.T) {
	f, err := CreateShared(1000)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	when := time.Duration(time.Now().Add(2 * time.Second).UnixNano())
	var cmds []*exec.Cmd
	var outs []*os.File
	for range 4 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestSharedChild$")
		cmd.Env = append(os.Environ(), "RATELIMIT_CHILD="+strconv.FormatInt(int64(when), 10))
		cmd.ExtraFiles = []*os.File{f}
		cmd.Stdout, cmd.Stderr = w, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		w.Close()
		cmds, outs = append(cmds, cmd), append(outs, r)
	}
	total := 0
	for i, cmd := range cmds {
		var n int
		out, _ := io.ReadAll(outs[i])
		outs[i].Close()
		_, err := fmt.Sscanf(string(out), "allowed %d\n", &n)
		if werr := cmd.Wait(); err != nil || werr != nil {
			t.Fatalf("process %d: %v %v", i, err, werr)
		}
		total += n
	}
	// Each process maps the shared clock from its own readings, which
	// may differ by a microsecond: a token, at most, of each.
	if total > 2000 || total < 2000-4 {
		t.Errorf("4 processes were allowed %d requests, want the burst, 2000", total)
	}
	tb, err := OpenShared(f)
	if err != nil {
		t.Fatal(err)
	}
	l := tb.Limit("shared", Spec{Rate: 1, Burst: 2000})
	for i := total; i < 2000; i++ {
		l.Take([]byte("k"), time.Unix(0, int64(when)))
	}
	if d := l.Take([]byte("k"), time.Unix(0, int64(when))); d.Allowed {
		t.Errorf("this process found a token the others took: %+v", d)
	}
}

// TestSharedChild is the process of TestSharedAcrossProcesses: it maps
// the table it inherited and takes 1,000 tokens at the given instant.
func TestSharedChild(t *testing.T) {
	v := os.Getenv("RATELIMIT_CHILD")
	if v == "" {
		t.Skip("run by TestSharedAcrossProcesses")
	}
	when, _ := strconv.ParseInt(v, 10, 64)
	tb, err := OpenShared(os.NewFile(3, "table"))
	if err != nil {
		t.Fatal(err)
	}
	l := tb.Limit("shared", Spec{Rate: 1, Burst: 2000})
	// Every process takes at the same instant of the shared clock, so
	// the count does not depend on when each one started.
	now := time.Unix(0, when)
	for time.Now().Before(now) {
		time.Sleep(time.Millisecond)
	}
	n := 0
	for range 1000 {
		if l.Take([]byte("k"), now).Allowed {
			n++
		}
	}
	fmt.Printf("allowed %d\n", n)
}

// TestOpenSharedRefusesOtherFiles: a file that is not a table is named
// and refused.
func TestOpenSharedRefusesOtherFiles(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "table")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write(make([]byte, 8192))
	if _, err := OpenShared(f); err == nil {
		t.Fatal("a file of zeros opened as a table")
	}
}

// TestTakeAllocatesNothing: a key the table holds, and the single
// bucket, cost no allocation.
func TestTakeAllocatesNothing(t *testing.T) {
	for name, l := range limiters(t, Spec{Rate: 1e6, Burst: 1e6}) {
		k := addrKey(9)
		l.Take(k, at(0))
		if n := testing.AllocsPerRun(1000, func() { l.Take(k, at(time.Millisecond)); l.Take(nil, at(time.Millisecond)) }); n != 0 {
			t.Errorf("%s: %v allocations a request", name, n)
		}
	}
}

// BenchmarkTableMillion measures a table of DefaultKeys under 1,000,000
// distinct client addresses that all empty their buckets within half a
// second (rate 1, burst 1: none refills): the memory it takes, and the
// share of those clients it had to evict while they were limited.
func BenchmarkTableMillion(b *testing.B) {
	const clients = 1_000_000
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tb := NewTable(DefaultKeys)
		l := tb.Limit("bench", Spec{Rate: 1, Burst: 1})
		for n := range uint32(clients) {
			l.Take(addrKey(n), at(time.Duration(n)*time.Duration(250)))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB")
		b.ReportMetric(float64(tb.Keys()), "slots")
		b.ReportMetric(float64(clients-tb.Len())/clients*100, "%evicted")
		runtime.KeepAlive(tb)
	}
}

// BenchmarkTake is a held key's take: in memory and shared, one
// goroutine and all of them on one key.
func BenchmarkTake(b *testing.B) {
	shared := sharedTable(b, 1000)
	for name, tb := range map[string]*Table{"memory": NewTable(1000), "shared": shared} {
		l := tb.Limit("bench", Spec{Rate: 1e9, Burst: 1e9})
		k := addrKey(1)
		b.Run(name, func(b *testing.B) {
			now := time.Now()
			for b.Loop() {
				l.Take(k, now)
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			now := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					l.Take(k, now)
				}
			})
		})
	}
}

// TestDeadHolderIsFound: a set whose lock a process holds that has
// exited, unreaped (a serving process killed mid-insert, before its
// supervisor waited for it), does not stop new keys of the set for good.
func TestDeadHolderIsFound(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait() // reaped only at the end: a zombie meanwhile
	pid := uint64(cmd.Process.Pid)
	deadline := time.Now().Add(5 * time.Second)
	for !exited(pid) {
		if time.Now().After(deadline) {
			t.Fatal("the child did not exit within 5s")
		}
		time.Sleep(time.Millisecond)
	}
	tb := NewTable(ways) // one set
	tb.set(0)[0] = pid   // the dead process holds its lock
	done := make(chan Decision, 1)
	go func() { done <- tb.Limit("test", Spec{Rate: 1, Burst: 1}).Take([]byte("new"), at(0)) }()
	select {
	case d := <-done:
		if !d.Allowed {
			t.Fatalf("a new key's first take: %+v, want allowed", d)
		}
	case <-time.After(5 * time.Second):
		cmd.Wait() // frees the taker, so the test can end
		<-done
		t.Fatal("a new key waited 5s on a lock held by a process that had exited")
	}
}
