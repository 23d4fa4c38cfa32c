package core

import (
	"testing"
	"time"
)

// The time a body's bytes earn at body_min_rate holds for bodies of any
// size: a 20 GB upload at 1 MB/s has earned 20,000 s, not a negative
// deadline that would cut it off at once.
func TestBodyAllowanceHoldsForAnySize(t *testing.T) {
	for _, c := range []struct {
		got, rate int64
		want      time.Duration
	}{
		{0, 1000, 0},
		{1500, 1000, 1500 * time.Millisecond},
		{20_000_000_000, 1_000_000, 20_000 * time.Second},
		{10_000_000_000, 1, maxAllowance},
		{1 << 62, 1024, maxAllowance},
	} {
		if got := allowance(c.got, c.rate); got != c.want {
			t.Errorf("allowance(%d bytes, %d B/s) = %v, want %v", c.got, c.rate, got, c.want)
		}
	}
}
