package config

import (
	"os"
	"strings"
	"testing"
)

// TestShapeProblems feeds files whose YAML is not the shape relay reads,
// each with one mistake a newcomer makes, and checks that the problem is
// put on the line to fix, under the key it belongs to, and says what
// shape was expected.
func TestShapeProblems(t *testing.T) {
	const b1 = "  - url: http://127.0.0.1:8001"
	tests := []struct {
		name string
		yaml string
		line int
		key  string
		msg  []string // the message holds each of these
	}{
		// Refused by the YAML parser, which stops elsewhere or says
		// nothing of the cause.
		{"item indented one more than its siblings", y("backends:", b1, "   - url: http://127.0.0.1:8002"), 3, "backends[1]",
			[]string{"this list item is indented 3 spaces, but the items of its list (from line 2) are indented 2 spaces",
				"(the YAML parser stopped at line 1: did not find expected '-' indicator)"}},
		{"item indented one less than its siblings", y("backends:", b1, " - url: http://127.0.0.1:8002"), 3, "backends[1]",
			[]string{"indented 1 space, but the items of its list (from line 2) are indented 2 spaces", "stopped at line 2"}},
		{"item at its siblings' keys", y("backends:", b1, "    - url: http://127.0.0.1:8002"), 3, "backends[1]",
			[]string{"indented 4 spaces, but the items of its list (from line 2) are indented 2 spaces"}},
		{"key of an item indented one less", y("backends:", b1, "   weight: 2"), 3, "backends[0].weight",
			[]string{`weight is indented 3 spaces, between the "- " (2 spaces) and the keys of its item (4 spaces)`,
				`"- url: http://127.0.0.1:8001" with "  weight: 2" under url`, "stopped at line 1"}},
		{"key of a second item indented one less", y("backends:", b1, "    weight: 2", "  - url: http://127.0.0.1:8002", "   weight: 2"), 5, "backends[1].weight",
			[]string{"weight is indented 3 spaces"}},
		{"key of an item indented one more", y("backends:", b1, "     weight: 2"), 3, "backends[0].weight",
			[]string{"mapping values are not allowed in this context; weight is indented 5 spaces, but url (line 2) is indented 4 spaces"}},
		{"key at the column of the dashes", y("backends:", "  - http://127.0.0.1:8001", "  weight: 2"), 3, "backends[0].weight",
			[]string{`weight stands in the column of the "- " of the list above it (from line 2)`, `"  weight: 2" under url`}},
		{"key under a bare URL", y("backends:", b1, "  - http://127.0.0.1:8002", "    weight: 3"), 4, "backends[1].weight",
			[]string{`"weight: 3" is under a list item that is a plain value (line 3)`, `write it as "- url: ..."`}},
		{"key without a space after the colon", y("backends:", b1, "    weight:2"), 3, "",
			[]string{`could not find expected ':'; "weight:2": a key needs a space after its colon: write "weight: 2"`}},
		{"top-level key without a space", y("port:8080", "backends:", b1), 1, "",
			[]string{`"port:8080": a key needs a space after its colon: write "port: 8080"`, "stopped at line 2"}},
		{"two keys on one line", y("backends:", b1+" weight: 2"), 2, "backends[0].url",
			[]string{`holds "weight: ", which YAML takes for a second key on the line: put "weight: 2" on a line of its own, under url`}},
		{"top-level key indented", y("port: 8080", "  listen: 127.0.0.1:8080", "backends:", b1), 2, "listen",
			[]string{"listen is indented 2 spaces, but port (line 1) is indented 0 spaces"}},
		{"tab", y("backends:", "\t- url: http://127.0.0.1:8001"), 2, "",
			[]string{"found character that cannot start any token; a tab indents this line; YAML indents with spaces only"}},
		{"comments and blank lines skipped", y("# relay", "", "backends:  # all of them", "  # the first", b1, "", "   weight: 2 # three spaces"), 7, "backends[0].weight",
			[]string{"weight is indented 3 spaces"}},
		{"nested lists keep their place", y("backends:", b1, "    weight: 2", "trusted_proxies:", "  - 10.0.0.0/8", " - 10.1.0.0/16"),
			6, "trusted_proxies[1]", []string{"indented 1 space, but the items of its list (from line 5) are indented 2 spaces"}},

		// Parsed, but the value is YAML of another shape.
		{"key folded into a bare URL", y("backends:", "-  http://127.0.0.1:8001", "   weight:2"), 2, "backends[0].url",
			[]string{`"http://127.0.0.1:8001 weight:2" is the URL with "weight:2" folded into it`,
				`Write the backend as "- url: http://127.0.0.1:8001" with "weight: 2" on the next line, under url`}},
		{"space in a URL", y("backends:", "  - http://127.0.0.1:8001 x"), 2, "backends[0].url",
			[]string{`"http://127.0.0.1:8001 x" holds a space`}},
		{"url key glued to its value", y("backends:", "  - url:http://127.0.0.1:8001"), 2, "backends[0].url",
			[]string{`"url:http://127.0.0.1:8001": a key needs a space after its colon: write "url: http://127.0.0.1:8001"`}},

		// Keys at the wrong level.
		{"backend key at the top level", y("backends:", b1, "weight: 2"), 3, "weight",
			[]string{`unknown key at the top level; it belongs to a backend: indent it under the backend's "- url:", lined up with url`}},
		{"backend tls key at the top level", y("tls_ca_file: /ca.pem", "backends:", b1), 1, "tls_ca_file",
			[]string{`did you mean "backend_tls_ca_file" (the default for every https backend)?`}},
		{"top-level key in a backend", y("backends:", b1, "    retries: 2"), 3, "backends[0].retries",
			[]string{"unknown key in a backend; it is a top-level setting: move it out of the backends list"}},
		{"top-level default in a backend", y("backends:", b1, "    backend_max_requests: 2"), 3, "backends[0].backend_max_requests",
			[]string{`did you mean "max_requests"?`}},
		{"discovery key at the top level", y("etcd:", "  prefix: /b/", "backends:", b1), 1, "etcd",
			[]string{"it belongs under discovery:"}},

		// Enumerated values.
		{"nginx's least_conn", y("algorithm: least_conn", "backends:", b1), 1, "algorithm",
			[]string{`unknown algorithm "least_conn"; did you mean "least-conn"? known: `}},
		{"nginx's ip_hash", y("algorithm: ip_hash", "backends:", b1), 1, "algorithm", []string{`did you mean "ip-hash"?`}},
		{"weighted", y("algorithm: weighted", "backends:", b1), 1, "algorithm", []string{`did you mean "weighted-round-robin"?`}},
		{"power of two", y("algorithm: power-of-two", "backends:", b1), 1, "algorithm", []string{`did you mean "p2c"?`}},
		{"HAProxy's source", y("algorithm: source", "backends:", b1), 1, "algorithm", []string{`did you mean "ip-hash"?`}},
		{"algorithm typo", y("algorithm: roundrobbin", "backends:", b1), 1, "algorithm", []string{`did you mean "roundrobin"?`}},
		{"algorithm upper case", y("algorithm: Round-Robin", "backends:", b1), 1, "algorithm", []string{`did you mean "round-robin"?`}},
		{"log level warning", y("log_level: warning", "backends:", b1), 1, "log_level", []string{`got "warning"; did you mean "warn"?`}},
		{"log level upper case", y("log_level: DEBUG", "backends:", b1), 1, "log_level", []string{`did you mean "debug"?`}},
		{"health check type upper case", y("health_check_type: HTTP", "backends:", b1), 1, "health_check_type", []string{`did you mean "http"?`}},
		{"health check type https", y("health_check_type: https", "backends:", b1), 1, "health_check_type", []string{`did you mean "http"?`}},
		{"tls version with its prefix", y("tls_min_version: TLSv1.3", "backends:", b1), 1, "tls_min_version", []string{`did you mean "1.3"?`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := problems(t, func() error { _, err := Parse([]byte(tt.yaml), "test.yml", testOpts); return err }())
			if len(ps) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(ps), (&Errors{ps}).Error())
			}
			p := ps[0]
			ok := p.File == "test.yml" && p.Line == tt.line && p.Key == tt.key
			for _, m := range tt.msg {
				ok = ok && strings.Contains(p.Msg, m)
			}
			if !ok {
				t.Errorf("got %s\nwant line %d, key %q, a message holding %q", p, tt.line, tt.key, tt.msg)
			}
		})
	}
}

// TestShapeHintQuietOnGoodFiles: the reading of a refused file's shape
// finds nothing in the files relay documents, so a hint it gives points
// at a real mistake rather than at correct YAML it misreads.
func TestShapeHintQuietOnGoodFiles(t *testing.T) {
	files := map[string]string{
		"flow lists":                 y("trusted_proxies: [10.0.0.0/8,", "  192.168.0.0/16]", "backends: [http://127.0.0.1:8001]"),
		"block scalar":               y("admin_token: |", "  0123456789abcdef", "   0123", "backends:", "- url: http://127.0.0.1:8001", "  weight: 2"),
		"tab in a block scalar":      y("admin_token: |", "  0123", "  \t4567", "backends:", "- url: http://127.0.0.1:8001"),
		"dashes at the key's column": y("backends:", "- url: http://127.0.0.1:8001", "  weight: 2", "- http://127.0.0.1:8002", "port: 8080"),
		"discovery": y("discovery:", "  etcd:", "    endpoints:", "      - http://127.0.0.1:2379", "    prefix: /relay/", "    announce:",
			"      url: http://10.0.0.1:8080", "port: 8080"),
		"quoted values": y(`admin_token: "a: b # c"`, "backends:", `  - url: 'http://127.0.0.1:8001'  # the first`),
		"documents":     y("---", "port: 8080", "..."),
	}
	for _, path := range []string{"../../examples/config.yml", "../../examples/original.yml"} {
		data, err := readFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[path] = data
	}
	for name, data := range files {
		if h, ok := shapeHint([]byte(data)); ok {
			t.Errorf("%s: hint %+v for a well-shaped file", name, h)
		}
	}
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// TestTLSMinVersionUnquoted: tls_min_version: 1.3 without quotes is a
// YAML number; it is taken as the version it reads as.
func TestTLSMinVersionUnquoted(t *testing.T) {
	if c := mustParse(t, y("tls_min_version: 1.3", "backends:", "  - http://127.0.0.1:8001")); c.TLSMinVersion != "1.3" {
		t.Fatalf("tls_min_version %q, want 1.3", c.TLSMinVersion)
	}
}
