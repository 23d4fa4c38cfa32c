package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestCheckExplainsYAMLShape: relay -check names the YAML shape that was
// expected for the mistakes a newcomer makes in the backends list, on
// the line to fix.
func TestCheckExplainsYAMLShape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, content string
		line          int
		want          string
	}{
		{"key folded into the URL", "backends:\n-  http://127.0.0.1:8001\n   weight:2\n", 2,
			`backends[0].url: "http://127.0.0.1:8001 weight:2" is the URL with "weight:2" folded into it`},
		{"item out of line", "backends:\n  - url: http://127.0.0.1:8001\n   - url: http://127.0.0.1:8002\n", 3,
			"backends[1]: invalid YAML: this list item is indented 3 spaces, but the items of its list (from line 2) are indented 2 spaces"},
		{"nginx's algorithm name", "algorithm: least_conn\nbackends:\n  - http://127.0.0.1:8001\n", 1,
			`algorithm: unknown algorithm "least_conn"; did you mean "least-conn"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path, problems := checkProblems(t, tt.content)
			if want := fmt.Sprintf("%s:%d: %s", path, tt.line, tt.want); len(problems) != 1 || !strings.HasPrefix(problems[0], want) {
				t.Errorf("problems:\n%s\nwant one starting\n%s", strings.Join(problems, "\n"), want)
			}
		})
	}
}
