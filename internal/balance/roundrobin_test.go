package balance

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"relay/internal/backend"
)

func TestRoundRobinOrder(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		want    string
	}{
		{name: "one", weights: []int{1}, want: "a a a"},
		{name: "three", weights: []int{1, 1, 1}, want: "a b c a b c a"},
		{name: "weights ignored", weights: []int{5, 1}, want: "a b a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewRoundRobin(pool(t, tt.weights...), Options{})
			want := strings.Fields(tt.want)
			var got []string
			for range want {
				got = append(got, short(p.Pick(0, Filter{})))
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("picks = %v, want %v", got, want)
			}
		})
	}
}

// When a backend leaves, the proxy rebuilds the picker without it; its share
// must spread evenly rather than fall on its neighbour.
func TestRoundRobinSpreadsLostShare(t *testing.T) {
	bs := equalPool(t, 4)
	p := NewRoundRobin([]*backend.Backend{bs[0], bs[2], bs[3]}, Options{})
	got := counts(p, 300, noKey)
	for _, b := range []*backend.Backend{bs[0], bs[2], bs[3]} {
		if got[b] != 100 {
			t.Errorf("%s got %d picks, want 100", short(b), got[b])
		}
	}
	if got[bs[1]] != 0 {
		t.Errorf("removed backend got %d picks", got[bs[1]])
	}
}

func TestRoundRobinCopiesSlice(t *testing.T) {
	bs := equalPool(t, 2)
	p := NewRoundRobin(bs, Options{})
	a := bs[0]
	bs[0] = bs[1]
	if got := p.Pick(0, Filter{}); got != a {
		t.Errorf("first pick = %s after caller changed its slice, want a", short(got))
	}
}

// Requests stepping at once advance the shared position between each
// other's probes; one that met only refused backends in its turn of probes
// must still find the one that is allowed, never return nil.
func TestSteppingPickersFindTheAllowedBackendUnderConcurrency(t *testing.T) {
	for _, name := range []string{"round-robin", "weighted-round-robin"} {
		t.Run(name, func(t *testing.T) {
			bs := pool(t, 1, 1)
			bs[0].SetHealthy(false)
			p, err := Build(name, bs, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var nils atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 20000 {
						if p.Pick(0, Filter{}) == nil {
							nils.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if n := nils.Load(); n != 0 {
				t.Errorf("%d of 160000 concurrent picks found nothing with one of two backends allowed", n)
			}
		})
	}
}
