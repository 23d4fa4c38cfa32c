package config

import (
	"reflect"
	"testing"

	"relay/internal/testcert"
)

// TestChangedNamesEverySettingButBackends: Changed names the keys whose
// values differ, live or not, in the order of the example file, and
// leaves the backends to the reload line's own lists.
func TestChangedNamesEverySettingButBackends(t *testing.T) {
	a := mustParse(t, y("listen: 127.0.0.1:8080", "retries: 2", "backends:", "  - http://127.0.0.1:8001"))
	b := mustParse(t, y("listen: 127.0.0.1:9090", "algorithm: p2c", "retries: 1", "log_level: debug",
		"backends:", "  - url: http://127.0.0.1:8001", "    weight: 3", "  - http://127.0.0.1:8002"))
	if got, want := Changed(a, b), []string{"listen", "algorithm", "log_level", "retries"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
	if got := Changed(a, a); len(got) != 0 {
		t.Fatalf("Changed of the same configuration = %v, want none", got)
	}
}

// TestChangedIgnoresLines: a reload of a file whose settings only moved
// to other lines (a comment added above them) changes no setting; the
// certificates, which remember their lines, are the same certificates.
func TestChangedIgnoresLines(t *testing.T) {
	p := testcert.NewCA(t).Server(t, testcert.ECDSA, "a.example")
	lines := []string{"tls_listen: 127.0.0.1:8443", "tls_certificates:"}
	lines = append(lines, certLines(p)...)
	lines = append(lines, "backends:", "  - http://127.0.0.1:8001")
	a := mustParse(t, y(lines...))
	b := mustParse(t, y(append([]string{"# a comment moves every line down"}, lines...)...))
	if got := Changed(a, b); len(got) != 0 {
		t.Fatalf("Changed = %v, want none: only the lines moved", got)
	}
	c := mustParse(t, y(append(lines[:len(lines):len(lines)], "tls_min_version: \"1.3\"")...))
	if got, want := Changed(a, c), []string{"tls_min_version"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Changed = %v, want %v", got, want)
	}
}
