package dataplane

import (
	"strings"
	"testing"

	"relay/internal/config"
)

// What relay -check and a reload accept, every serving process must be
// able to build: the supervisor takes a file its checks pass, tells the
// processes to apply it and reports it reloaded, so a route the data
// plane refuses would leave the processes on the old file while the
// supervisor, the admin API and the operator believe the new one runs.
// Each route here is refused by both, or built.
func TestDataPlaneBuildsWhatConfigAccepts(t *testing.T) {
	routes := []string{
		`{match: {path_prefix: /a}, pool: p, replace_prefix: "/b%2Fc"}`,
		`{match: {path_prefix: /a}, pool: p, replace_prefix: "/b%5cc"}`,
		`{match: {path_prefix: /a}, pool: p, replace_prefix: "/b%41"}`,
		`{match: {path_prefix: /a}, pool: p, replace_prefix: "/b/"}`,
		`{match: {path_prefix: /a}, redirect: {status: 301, path: "/b%2Fc"}}`,
		`{match: {path_prefix: /a}, redirect: {status: 301, path: "/b%61"}}`,
		`{match: {path_prefix: /a}, redirect: {status: 301, host: "B.example.com"}}`,
		`{match: {path_prefix: /a}, redirect: {status: 301, host: "b_c.example.com"}}`,
		`{match: {path_prefix: /a}, redirect: {status: 301, host: "[::1]"}}`,
		`{match: {path_prefix: /a}, redirect: {status: 301, port: 8443}}`,
		`{match: {path: "/a%2Fb"}, pool: p}`,
		`{match: {path: "/a%7e"}, pool: p}`,
		`{match: {host: "b_c.example.com"}, pool: p}`,
		`{match: {host: "[::FFFF:1.2.3.4]"}, pool: p}`,
		`{match: {headers: {X-A: "b c"}}, pool: p}`,
		`{match: {query: {"a b": "c"}}, pool: p}`,
		`{match: {methods: [M-1]}, pool: p}`,
		`{match: {path_prefix: /a}, pool: p, request_headers: {set: {X-A: "\u007f"}}}`,
		`{match: {path_prefix: /a}, pool: p, response_headers: {remove: [X-A]}}`,
	}
	for _, mode := range []string{"reject", "decode", "keep"} {
		for _, r := range routes {
			yml := "escaped_slashes: " + mode + "\npools:\n  p: {backends: [http://127.0.0.1:1]}\nroutes:\n  - " + r + "\n"
			cfg, err := config.Parse([]byte(yml), "test.yml", config.Options{Algorithms: []string{"round-robin"}})
			if err != nil {
				continue // refused with the file's line: as it should be
			}
			if _, err := New(cfg, Options{}); err != nil {
				t.Errorf("escaped_slashes %s, route %s: config accepts it, the data plane refuses it: %v", mode, strings.TrimSpace(r), err)
			}
		}
	}
}
