package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// testOpts accepts the algorithm names relay registers.
var testOpts = Options{Algorithms: []string{
	"round-robin", "roundrobin", "weighted-round-robin", "random",
	"least-conn", "leastconn", "ip-hash", "p2c",
}}

// problems returns the problems in err, failing the test when err is not a
// non-empty *Errors.
func problems(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		t.Fatal("got no error, want problems")
	}
	var e *Errors
	if !errors.As(err, &e) {
		t.Fatalf("error is %T (%v), want *Errors", err, err)
	}
	if len(e.Problems) == 0 {
		t.Fatal("*Errors holds no problems")
	}
	return e.Problems
}

// mustParse parses yaml that must be valid.
func mustParse(t *testing.T, yaml string) *Config {
	t.Helper()
	c, err := Parse([]byte(yaml), "test.yml", testOpts)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// y joins lines into a YAML document, so a test's line numbers can be
// read off the argument positions.
func y(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }
