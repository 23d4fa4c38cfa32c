package stats

import "testing"

// TestAddSumsByPoolAndName: one address in two pools is two backends'
// counts, summed over processes each on its own.
func TestAddSumsByPoolAndName(t *testing.T) {
	proc := func(n uint64) *Process {
		return &Process{Backends: []Backend{
			{Pool: "web", Name: "http://a:1", Served: n},
			{Pool: "api", Name: "http://a:1", Served: 10 * n},
		}}
	}
	var sum Process
	sum.Add(proc(1))
	sum.Add(proc(2))
	sum.Sort()
	if len(sum.Backends) != 2 {
		t.Fatalf("summed into %d backends, want 2: %+v", len(sum.Backends), sum.Backends)
	}
	if b := sum.Backends[0]; b.Pool != "api" || b.Served != 30 {
		t.Errorf("api's: %+v, want 30 served", b)
	}
	if b := sum.Backends[1]; b.Pool != "web" || b.Served != 3 {
		t.Errorf("web's: %+v, want 3 served", b)
	}
}
