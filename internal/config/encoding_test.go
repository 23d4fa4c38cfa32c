package config

import (
	"strings"
	"testing"
)

// TestEncodingProblems: bytes the YAML parser refuses before it reads the
// file's structure (not UTF-8, control characters) are reported on their
// own line, saying what they are, even when the file's shape has a mistake
// of its own further up: the parser names no line for them, and the shape
// reading must not blame the wrong line nor print "line 0".
func TestEncodingProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		line int
		msg  string
	}{
		{"invalid UTF-8", y("backends:", "  - http://127.0.0.1:1", "listen: \"\xff\""), 3, "invalid leading UTF-8 octet"},
		{"invalid UTF-8 below a tab", y("backends:", "  - http://127.0.0.1:1", "x:", "\t- a", "listen: \"\xff\""), 5, "invalid leading UTF-8 octet"},
		{"control byte below a tab", y("backends:", "  - http://127.0.0.1:1", "x:", "\t- a", "listen: \"a\x01\""), 5, "control characters are not allowed"},
		{"NUL", y("backends:", "  - http://127.0.0.1:1\x00"), 2, "control characters are not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := problems(t, func() error { _, err := Parse([]byte(tt.yaml), "test.yml", testOpts); return err }())
			if len(ps) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(ps), (&Errors{ps}).Error())
			}
			p := ps[0]
			if p.Line != tt.line || !strings.Contains(p.Msg, tt.msg) || strings.Contains(p.Msg, "line 0") {
				t.Errorf("got %s\nwant line %d, a message holding %q and not %q", p, tt.line, tt.msg, "line 0")
			}
		})
	}
}
