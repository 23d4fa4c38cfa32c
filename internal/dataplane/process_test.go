package dataplane

import (
	"testing"
	"time"

	"relay/internal/ratelimit"
	"relay/internal/supervisor"
)

// The data plane of each serving process takes its part of a request cap,
// so together they hold relay to the cap; the control's instance id and
// sticky key; and the rate-limit buckets in the memory the supervisor
// handed every process.
func TestNewForProcess(t *testing.T) {
	cfg := parse(t, "processes: 2\nbackends:\n  - url: http://127.0.0.1:8001\n    max_requests: 3\n")
	shared, err := ratelimit.CreateShared(0)
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	spec := ratelimit.Spec{Rate: 1, Burst: 1}
	now := time.Now()
	for index, want := range []int{2, 1} {
		p := &supervisor.Process{Index: index, Shared: shared,
			Config: supervisor.ConfigSource{Instance: "0123abcd", StickyKey: []byte("the control's key")}}
		pl, err := NewForProcess(cfg, p, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer pl.Close()
		if got := pl.Backends()[0].MaxRequests(); got != want {
			t.Errorf("process %d: cap %d, want its part of 3 over 2 processes, %d", index, got, want)
		}
		if pl.opts.Instance != "0123abcd" || string(pl.opts.StickyKey) != "the control's key" {
			t.Errorf("process %d: instance %q and sticky key %q; want the control's", index, pl.opts.Instance, pl.opts.StickyKey)
		}
		// The one token of the bucket goes to the first process.
		if d := pl.opts.RateTable.Limit("l", spec).Take([]byte("k"), now); d.Allowed != (index == 0) {
			t.Errorf("process %d: token allowed %v; want the first process's take to hold for the second", index, d.Allowed)
		}
	}
}
