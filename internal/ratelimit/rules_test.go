package ratelimit

import (
	"testing"
	"time"
)

// TestRules: a rate and a burst are 1 to MaxRate; a Spec at the bounds
// makes buckets that work (a token an interval of at least 1ns, a window
// that does not overflow); the failures' names go both ways.
func TestRules(t *testing.T) {
	for _, n := range []int{1, 100, MaxRate} {
		if CheckRate(n) != nil || CheckBurst(n) != nil {
			t.Errorf("%d refused", n)
		}
	}
	for _, tt := range []struct {
		n           int
		rate, burst string
	}{
		{0, "must be more than 0 requests a second, got 0", "must be at least 1 request, got 0"},
		{-1, "must be more than 0 requests a second, got -1", "must be at least 1 request, got -1"},
		{MaxRate + 1, "must be at most 1000000000 requests a second, got 1000000001", "must be at most 1000000000 requests, got 1000000001"},
	} {
		if err := CheckRate(tt.n); err == nil || err.Error() != tt.rate {
			t.Errorf("CheckRate(%d) = %v, want %q", tt.n, err, tt.rate)
		}
		if err := CheckBurst(tt.n); err == nil || err.Error() != tt.burst {
			t.Errorf("CheckBurst(%d) = %v, want %q", tt.n, err, tt.burst)
		}
	}
	for _, s := range []Spec{{Rate: MaxRate, Burst: MaxRate}, {Rate: 1, Burst: MaxRate}, {Rate: MaxRate, Burst: 1}} {
		g := newGCRA(s)
		if g.interval < 1 || g.window < g.interval {
			t.Errorf("%+v: interval %d, window %d", s, g.interval, g.window)
		}
		if _, d := g.take(0, int64(time.Hour)); !d.Allowed {
			t.Errorf("%+v: a full bucket refused a request", s)
		}
	}
	for _, f := range Failures {
		if g, ok := ParseFailure(f.String()); !ok || g != f {
			t.Errorf("ParseFailure(%q) = %v, %v", f, g, ok)
		}
	}
	if _, ok := ParseFailure("open"); ok {
		t.Error(`ParseFailure("open") found a failure`)
	}
}
