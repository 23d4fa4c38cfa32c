package balance

import (
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"

	"relay/internal/backend"
)

// algorithms lists each algorithm once under its main name; aliases are
// checked against it in TestRegistry.
var algorithms = []struct {
	name    string
	aliases []string
	build   Constructor
}{
	{name: "round-robin", aliases: []string{"roundrobin"}, build: NewRoundRobin},
	{name: "weighted-round-robin", build: NewWeightedRoundRobin},
	{name: "random", build: NewRandom},
	{name: "least-conn", aliases: []string{"leastconn"}, build: NewLeastConn},
	{name: "ip-hash", build: NewIPHash},
	{name: "p2c", build: NewP2C},
}

func sameFunc(a, b Constructor) bool {
	return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}

func TestRegistry(t *testing.T) {
	var want []string
	for _, alg := range algorithms {
		for _, name := range append([]string{alg.name}, alg.aliases...) {
			want = append(want, name)
			a, err := Lookup(name)
			if err != nil {
				t.Errorf("Lookup(%q): %v", name, err)
				continue
			}
			if !sameFunc(a.New, alg.build) || a.Name != alg.name {
				t.Errorf("Lookup(%q) returned %q with the wrong constructor", name, a.Name)
			}
			if a.HashesClient != (alg.name == "ip-hash") {
				t.Errorf("Lookup(%q).HashesClient = %v; only ip-hash hashes the client", name, a.HashesClient)
			}
		}
	}
	if got := Names(); len(got) != len(want) {
		t.Errorf("Names() = %v, want exactly %v", got, want)
	}
}

func TestLookupUnknown(t *testing.T) {
	_, err := Lookup("fastest")
	if err == nil {
		t.Fatal("Lookup(\"fastest\") succeeded")
	}
	for _, want := range append([]string{`"fastest"`}, Names()...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, err := Build("fastest", equalPool(t, 2), Options{}); err == nil {
		t.Error("Build with an unknown name succeeded")
	}
}

func TestBuild(t *testing.T) {
	bs := equalPool(t, 3)
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p, err := Build(name, bs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if b := p.Pick(mixKey(1), Filter{}); b == nil || !contains(bs, b) {
				t.Errorf("Pick = %v, want one of the pool", b)
			}
			empty, err := Build(name, nil, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for k := range 5 {
				if b := empty.Pick(mixKey(k), Filter{}); b != nil {
					t.Errorf("Build with no backends: Pick returned %s", short(b))
				}
			}
		})
	}
	// Build shields new algorithms from empty slices; the built-in
	// constructors, being exported, cope with them too.
	for _, alg := range algorithms {
		if b := alg.build(nil, Options{}).Pick(1, Filter{}); b != nil {
			t.Errorf("%s constructor with no backends: Pick returned %s", alg.name, short(b))
		}
	}
}

func contains(bs []*backend.Backend, b *backend.Backend) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}

// Every picker is hammered from several goroutines with the default Rand
// while requests are counted in and out; run with -race this catches any
// unsynchronised state, and the counters must end at zero.
func TestConcurrentPicks(t *testing.T) {
	const goroutines, picks = 8, 2000
	for _, alg := range algorithms {
		t.Run(alg.name, func(t *testing.T) {
			bs := pool(t, 3, 1, 2, 1, 1)
			p := alg.build(bs, Options{})
			var wg sync.WaitGroup
			errs := make(chan string, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					for i := range picks {
						b := p.Pick(mixKey(g*picks+i), Filter{})
						if !contains(bs, b) {
							errs <- "picked a backend outside the pool"
							return
						}
						b.Acquire()
						b.Release()
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Fatal(e)
			}
			var served uint64
			for _, b := range bs {
				if b.InFlight() != 0 {
					t.Errorf("%s has %d in flight", short(b), b.InFlight())
				}
				served += b.Served()
			}
			if served != goroutines*picks {
				t.Errorf("served %d, want %d", served, goroutines*picks)
			}
		})
	}
	t.Run("weighted-round-robin loop", func(t *testing.T) {
		bs := pool(t, maxCycle, 3, 1)
		p := NewWeightedRoundRobin(bs, Options{})
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range picks {
					p.Pick(0, Filter{})
				}
			})
		}
		wg.Wait()
		// Had any step been lost or torn, the schedule would now differ from
		// one advanced the same number of times on a single goroutine.
		ref := newSmooth(bs)
		for range goroutines * picks {
			ref.Pick(0, Filter{})
		}
		for i := range 100 {
			if got, want := p.Pick(0, Filter{}), ref.Pick(0, Filter{}); got != want {
				t.Fatalf("pick %d after the concurrent run: %s, want %s", i, short(got), short(want))
			}
		}
	})
}

// Picking must not allocate, at any pool size.
func TestPickAllocs(t *testing.T) {
	for _, alg := range algorithms {
		for _, n := range []int{3, 1000} {
			bs := equalPool(t, n)
			p := alg.build(bs, Options{})
			key := uint64(0)
			if a := testing.AllocsPerRun(1000, func() { key += 0x9e3779b97f4a7c15; p.Pick(key, Filter{}) }); a != 0 {
				t.Errorf("%s n=%d: %v allocations per pick, want 0", alg.name, n, a)
			}
		}
	}
	loop := NewWeightedRoundRobin(pool(t, maxCycle, 1), Options{})
	if a := testing.AllocsPerRun(1000, func() { loop.Pick(0, Filter{}) }); a != 0 {
		t.Errorf("weighted-round-robin loop: %v allocations per pick, want 0", a)
	}
	addr := netip.MustParseAddr("2001:db8::7")
	if a := testing.AllocsPerRun(1000, func() { HashAddr(addr) }); a != 0 {
		t.Errorf("HashAddr: %v allocations, want 0", a)
	}
}
