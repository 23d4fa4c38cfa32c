package balance

import (
	"fmt"
	"testing"
)

// BenchmarkPick measures one pick per algorithm at a small and a large pool.
// Keys change every iteration so ip-hash reads the table as real traffic
// would.
func BenchmarkPick(b *testing.B) {
	for _, alg := range algorithms {
		for _, n := range []int{3, 1000} {
			b.Run(fmt.Sprintf("%s/n=%d", alg.name, n), func(b *testing.B) {
				p := alg.build(equalPool(b, n), Options{})
				b.ReportAllocs()
				key := uint64(0)
				for b.Loop() {
					key += 0x9e3779b97f4a7c15
					p.Pick(key, Filter{})
				}
			})
		}
	}
}

// BenchmarkBuild measures building each picker for 1,000 backends, which
// happens on every membership change. ip-hash is the Maglev table build.
func BenchmarkBuild(b *testing.B) {
	for _, alg := range algorithms {
		b.Run(fmt.Sprintf("%s/n=1000", alg.name), func(b *testing.B) {
			bs := equalPool(b, 1000)
			b.ReportAllocs()
			for b.Loop() {
				alg.build(bs, Options{})
			}
		})
	}
	// Uneven weights make the smooth cycle long: 1,000 backends of weights
	// 1..10 give a cycle of 5,500 entries.
	b.Run("weighted-round-robin/n=1000,weights=1..10", func(b *testing.B) {
		w := make([]int, 1000)
		for i := range w {
			w[i] = i%10 + 1
		}
		bs := pool(b, w...)
		b.ReportAllocs()
		for b.Loop() {
			NewWeightedRoundRobin(bs, Options{})
		}
	})
	b.Run("ip-hash/n=10000", func(b *testing.B) {
		bs := equalPool(b, 10000)
		b.ReportAllocs()
		for b.Loop() {
			NewIPHash(bs, Options{})
		}
	})
}
