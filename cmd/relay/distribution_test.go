package main

import (
	"slices"
	"testing"
)

// assertCycle checks that got repeats one order of all of bs, period len(bs).
func assertCycle(t *testing.T, got []string, bs []*backendServer) {
	t.Helper()
	first := got[:len(bs)]
	for _, b := range bs {
		if !slices.Contains(first, b.hello) {
			t.Fatalf("the first %d answers %q leave out %q", len(bs), first, b.hello)
		}
	}
	for i, body := range got {
		if body != first[i%len(bs)] {
			t.Fatalf("answer %d is %q, want %q: not a cycle over every backend\n%q", i, body, first[i%len(bs)], got)
		}
	}
}

func TestRoundRobinThroughRelay(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 3)
	r, started := startRelay(t, "", "-config", writeConfig(t, "algorithm: round-robin\n"+backendsYAML(urlsOf(bs))))
	if started.Num("healthy") != 3 {
		t.Fatalf("started line %v, want 3 healthy backends", started)
	}
	assertCycle(t, sequence(t, newClient(t), r, 30), bs)
	r.stop()
}

func TestWeightedRoundRobinThroughRelay(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 3)
	weights := []int{3, 1, 1}
	r, _ := startRelay(t, "", "-config",
		writeConfig(t, "algorithm: weighted-round-robin\n"+backendsYAML(urlsOf(bs), weights...)))
	got := sequence(t, newClient(t), r, 40)
	want := map[string]int{}
	for i, b := range bs {
		want[b.hello] = weights[i]
	}
	// Smooth weighted round robin repeats with period sum(weights), so every
	// window of that length, wherever it starts, holds each backend exactly
	// its weight's number of times.
	for start := 0; start+5 <= len(got); start++ {
		count := map[string]int{}
		for _, body := range got[start : start+5] {
			count[body]++
		}
		for hello, w := range want {
			if count[hello] != w {
				t.Fatalf("window %d..%d gives %q %d answers, want %d\n%q", start, start+4, hello, count[hello], w, got)
			}
		}
	}
	r.stop()
}
