package config

import (
	"strings"
	"testing"
)

// TestWarnings: weights that differ under an algorithm that ignores them
// are a warning on the first differing weight's line; equal weights, or
// an algorithm that weighs them, are none.
func TestWarnings(t *testing.T) {
	opts := testOpts
	opts.IgnoringWeights = []string{"random", "round-robin", "roundrobin"}
	const b2 = "  - url: http://127.0.0.1:8002"
	tests := []struct {
		name, yaml string
		over       Overlay
		want       string // "" for no warning
	}{
		{"default algorithm", y("backends:", "  - http://127.0.0.1:8001", b2, "    weight: 3"), Overlay{},
			"test.yml:4: warning: backends[1].weight: weight 3 differs from the first backend's (1), but algorithm round-robin (the default) ignores them"},
		{"random", y("algorithm: random", "backends:", "  - url: http://127.0.0.1:8001", "    weight: 2", b2), Overlay{},
			"test.yml:5: warning: backends[1].weight: weight 1 differs from the first backend's (2), but algorithm random ignores them"},
		{"alias", y("algorithm: roundrobin", "backends:", "  - http://127.0.0.1:8001", b2, "    weight: 3"), Overlay{}, "algorithm roundrobin ignores them"},
		{"algorithm from the flag", y("algorithm: p2c", "backends:", "  - http://127.0.0.1:8001", b2, "    weight: 3"), Overlay{Algorithm: "random"},
			"algorithm random ignores them"},
		{"equal weights", y("backends:", "  - url: http://127.0.0.1:8001", "    weight: 2", b2, "    weight: 2"), Overlay{}, ""},
		{"weighted", y("algorithm: weighted-round-robin", "backends:", "  - http://127.0.0.1:8001", b2, "    weight: 3"), Overlay{}, ""},
		{"least-conn", y("algorithm: least-conn", "backends:", "  - http://127.0.0.1:8001", b2, "    weight: 3"), Overlay{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseOverlay([]byte(tt.yaml), "test.yml", tt.over, opts)
			if err != nil {
				t.Fatal(err)
			}
			ws := c.Warnings(opts)
			switch {
			case tt.want == "" && len(ws) != 0:
				t.Errorf("warnings %v, want none", ws)
			case tt.want != "" && (len(ws) != 1 || !strings.Contains(ws[0].Warning(), tt.want)):
				t.Errorf("warnings %v, want one holding %q", ws, tt.want)
			}
		})
	}
	if w := WeightsIgnored("random", []int{1, 1, 5}, opts); !strings.HasPrefix(w, "backend weights differ, but algorithm random ignores them") {
		t.Errorf("WeightsIgnored(random, 1 1 5) = %q", w)
	}
	if w := WeightsIgnored("random", nil, opts) + WeightsIgnored("p2c", []int{1, 5}, opts); w != "" {
		t.Errorf("WeightsIgnored with no members or under p2c = %q, want none", w)
	}
}
