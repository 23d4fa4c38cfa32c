package stats

import (
	"encoding/json"
	"testing"
	"time"
)

func TestGRPCIndex(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", -1}, {"0", 0}, {"5", 5}, {"14", 14}, {"16", 16}, {"05", 5}, {"000", 0},
		{"17", NumGRPC - 1}, {"99999999999999999999999", NumGRPC - 1}, {"-1", NumGRPC - 1},
		{"1 ", NumGRPC - 1}, {" 1", NumGRPC - 1}, {"OK", NumGRPC - 1}, {"1a", NumGRPC - 1},
	} {
		if got := GRPCIndex(c.in); got != c.want {
			t.Errorf("GRPCIndex(%q) = %d, want %d", c.in, got, c.want)
		}
	}
	if GRPCCodes[14] != "14" || GRPCNames[14] != "UNAVAILABLE" || GRPCNames[16] != "UNAUTHENTICATED" || GRPCCodes[NumGRPC-1] != "other" {
		t.Errorf("labels: %q, names: %q", GRPCCodes, GRPCNames)
	}
}

// TestGRPCCounts: a gRPC response counts under its grpc-status, a
// request that is not gRPC under none, and the counts survive the
// channel's JSON and sum over processes.
func TestGRPCCounts(t *testing.T) {
	var r Requests
	for _, s := range []string{"0", "0", "5", "14", "bogus", "99", ""} {
		r.Observe(2, 200, time.Millisecond, 0, 0)
		r.ObserveGRPC(s)
	}
	c := r.Read()
	want := [NumGRPC]uint64{0: 2, 5: 1, 14: 1, NumGRPC - 1: 2}
	if c.GRPC != want {
		t.Fatalf("counted %v, want %v", c.GRPC, want)
	}
	if c.Total() != 7 {
		t.Errorf("requests %d, want 7: gRPC counts are a subset of the requests", c.Total())
	}

	proc := &Process{Backends: []Backend{{Pool: "rpc", Name: "http://a:1", Requests: c}},
		Pools: []Pool{{Name: "rpc", Unanswered: Counts{GRPC: [NumGRPC]uint64{14: 3}}}}}
	wire, err := json.Marshal(proc)
	if err != nil {
		t.Fatal(err)
	}
	var back Process
	if err := json.Unmarshal(wire, &back); err != nil {
		t.Fatal(err)
	}
	var sum Process
	sum.Add(proc)
	sum.Add(&back)
	if got := sum.Backends[0].Requests.GRPC; got[0] != 4 || got[5] != 2 || got[14] != 2 || got[NumGRPC-1] != 4 {
		t.Errorf("backend summed over two processes: %v", got)
	}
	if got := sum.Pools[0].Unanswered.GRPC[14]; got != 6 {
		t.Errorf("pool's unanswered UNAVAILABLE summed: %d, want 6", got)
	}
}

// TestObserveGRPCAllocates nothing: it runs on every request.
func TestObserveGRPCAllocates(t *testing.T) {
	var r Requests
	s := string([]byte("14"))
	if n := testing.AllocsPerRun(100, func() { r.ObserveGRPC(s); r.ObserveGRPC("") }); n != 0 {
		t.Errorf("ObserveGRPC: %v allocations, want 0", n)
	}
}
