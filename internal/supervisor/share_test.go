package supervisor

import "testing"

func TestShareSplitsACapExactly(t *testing.T) {
	for _, c := range []struct{ limit, procs int }{{2, 2}, {3, 2}, {7, 3}, {100, 8}, {5, 1}, {0, 4}} {
		sum := 0
		for i := range c.procs {
			part := Share(c.limit, c.procs, i)
			if c.limit > 0 && part < 1 {
				t.Errorf("Share(%d, %d, %d) = %d, want at least 1", c.limit, c.procs, i, part)
			}
			if d := part - c.limit/c.procs; c.procs > 1 && c.limit > 0 && (d < 0 || d > 1) {
				t.Errorf("Share(%d, %d, %d) = %d, not an equal part", c.limit, c.procs, i, part)
			}
			sum += part
		}
		if sum != c.limit {
			t.Errorf("parts of %d over %d processes sum to %d", c.limit, c.procs, sum)
		}
	}
}
