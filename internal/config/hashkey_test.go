package config

import (
	"strings"
	"testing"
)

// TestHashKeyChecks: hash_key and hash_balance_factor are refused with
// their file and line when malformed, at the top level and in a pool.
func TestHashKeyChecks(t *testing.T) {
	const be = "backends: [http://127.0.0.1:8001]"
	tests := []struct {
		name, yaml, want string // want "" for valid
	}{
		{"client", y("algorithm: ip-hash", "hash_key: client", be), ""},
		{"header", y("algorithm: ip-hash", "hash_key: header:X-User", be), ""},
		{"cookie", y("hash_key: cookie:session", be), ""},
		{"query", y("hash_key: query:user_id", be), ""},
		{"path", y("hash_key: path", "hash_balance_factor: 125", be), ""},
		{"unknown", y(be, "hash_key: haeder:X"), `test.yml:2: hash_key: unknown hash key "haeder:X"; known: client, path, header:NAME, cookie:NAME, query:NAME; did you mean "header"?`},
		{"no name", y(be, "hash_key: 'cookie:'"), `test.yml:2: hash_key: "cookie:" needs a name: cookie:NAME`},
		{"bad header name", y(be, "hash_key: 'header:X User'"), `test.yml:2: hash_key: "header:X User": "X User" is not a valid header name`},
		{"bad query name", y(be, "hash_key: 'query:a&b'"), `test.yml:2: hash_key: "query:a&b": "a&b" is not a valid query parameter name`},
		{"factor low", y(be, "hash_balance_factor: 99"), "test.yml:2: hash_balance_factor: must be 0 (off) or a percentage from 100 to 1000, got 99"},
		{"factor high", y(be, "hash_balance_factor: 1001"), "got 1001"},
		{"in a pool", y("pools:", "  a:", "    "+be, "    hash_balance_factor: 50"), "test.yml:4: pools.a.hash_balance_factor: must be 0 (off)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseOverlay([]byte(tt.yaml), "test.yml", Overlay{}, testOpts)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one holding %q", err, tt.want)
			}
		})
	}
}

// TestHashKeyWarnings: hash_key or hash_balance_factor set where the
// algorithm does not hash is a warning on its line; under ip-hash, or
// inherited by a pool with another algorithm, it is none.
func TestHashKeyWarnings(t *testing.T) {
	opts := testOpts
	opts.Hashing = []string{"ip-hash"}
	const be = "backends: [http://127.0.0.1:8001]"
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"ip-hash", y("algorithm: ip-hash", "hash_key: path", "hash_balance_factor: 125", be), nil},
		{"default value", y("hash_key: client", be), nil},
		{"round-robin", y(be, "hash_key: path", "hash_balance_factor: 125"), []string{
			"test.yml:2: warning: hash_key: hash_key is set, but algorithm round-robin does not hash, so it has no effect; it applies to ip-hash",
			"test.yml:3: warning: hash_balance_factor: hash_balance_factor is set",
		}},
		{"pool", y("pools:", "  a:", "    "+be, "    algorithm: p2c", "    hash_key: cookie:s"), []string{"test.yml:5: warning: pools.a.hash_key: hash_key is set, but algorithm p2c does not hash"}},
		{"inherited", y("algorithm: ip-hash", "hash_key: path", be, "pools:", "  a:", "    "+be, "    algorithm: p2c"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseOverlay([]byte(tt.yaml), "test.yml", Overlay{}, opts)
			if err != nil {
				t.Fatal(err)
			}
			var ws []Problem
			for _, w := range c.Warnings(opts) {
				if strings.Contains(w.Warning(), "hash_") {
					ws = append(ws, w) // not the unused pool's warning
				}
			}
			if len(ws) != len(tt.want) {
				t.Fatalf("warnings %v, want %q", ws, tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(ws[i].Warning(), w) {
					t.Errorf("warning %q, want one holding %q", ws[i].Warning(), w)
				}
			}
		})
	}
}
