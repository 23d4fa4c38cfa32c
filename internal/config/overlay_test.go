package config

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

const fileWithListen = "listen: 127.0.0.1:9000\nbackends:\n  - url: http://127.0.0.1:8001\n    weight: 5\n"
const fileWithPort = "port: 9000\nalgorithm: random\nbackends:\n  - url: http://127.0.0.1:8001\n    weight: 5\n"

func TestApplyPrecedence(t *testing.T) {
	tests := []struct {
		name     string
		file     string // "" starts from Default()
		overlay  Overlay
		listen   string
		port     int
		algo     string
		backends []string // "url weight"
	}{
		{"nothing given keeps the file", fileWithPort, Overlay{}, ":9000", 9000, "random", []string{"http://127.0.0.1:8001 5"}},
		{"port flag over file port", fileWithPort, Overlay{Port: 8081}, ":8081", 8081, "random", []string{"http://127.0.0.1:8001 5"}},
		{"port flag keeps file listen host", fileWithListen, Overlay{Port: 8081}, "127.0.0.1:8081", 8081, "round-robin", []string{"http://127.0.0.1:8001 5"}},
		{"listen flag over port flag", fileWithPort, Overlay{Port: 8081, Listen: "127.0.0.1:7000"}, "127.0.0.1:7000", 8081, "random", []string{"http://127.0.0.1:8001 5"}},
		{"algorithm flag", fileWithPort, Overlay{Algorithm: "least-conn"}, ":9000", 9000, "least-conn", []string{"http://127.0.0.1:8001 5"}},
		{"backends flag replaces file", fileWithPort, Overlay{Backends: []string{"http://127.0.0.1:8002", " http://LOCALHOST:8003 "}}, ":9000", 9000, "random",
			[]string{"http://127.0.0.1:8002 1", "http://localhost:8003 1"}},
		{"no file", "", Overlay{Backends: []string{"http://127.0.0.1:8001"}, Port: 8090}, ":8090", 8090, "round-robin", []string{"http://127.0.0.1:8001 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			if tt.file != "" {
				c = mustParse(t, tt.file)
			}
			if err := c.Apply(tt.overlay, testOpts); err != nil {
				t.Fatal(err)
			}
			if c.Listen != tt.listen || c.Port != tt.port || c.Algorithm != tt.algo {
				t.Errorf("listen %q port %d algorithm %q, want %q %d %q", c.Listen, c.Port, c.Algorithm, tt.listen, tt.port, tt.algo)
			}
			var got []string
			for _, b := range c.Backends {
				got = append(got, b.URL.String()+" "+strconv.Itoa(b.Weight))
				if len(tt.overlay.Backends) > 0 && b.Line != 0 {
					t.Errorf("backend from flags has line %d", b.Line)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.backends, ",") {
				t.Errorf("backends %v, want %v", got, tt.backends)
			}
		})
	}
}

// TestLoadOverlayFillsMissingBackends: a file that only tunes settings plus
// -backends is a whole configuration.
func TestLoadOverlayFillsMissingBackends(t *testing.T) {
	path := t.TempDir() + "/relay.yml"
	if err := writeFile(path, "algorithm: random\nport: 8081\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, testOpts); err == nil || !strings.Contains(err.Error(), "no backends") {
		t.Fatalf("Load without backends: %v", err)
	}
	c, err := LoadOverlay(path, Overlay{Backends: []string{"http://127.0.0.1:8001"}}, testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Backends) != 1 || c.Algorithm != "random" || c.Listen != ":8081" {
		t.Errorf("got %+v", c)
	}
}

func TestApplyProblems(t *testing.T) {
	tests := []struct {
		name    string
		overlay Overlay
		want    []string
	}{
		{"backend without scheme", Overlay{Backends: []string{"localhost:8001"}},
			[]string{`flags: -backends: "localhost:8001" has no scheme; write "http://localhost:8001"`}},
		{"several bad backends", Overlay{Backends: []string{"ftp://127.0.0.1:1", "", "http://127.0.0.1:2/x"}},
			[]string{
				"flags: -backends: backend URL is empty",
				`flags: -backends: "ftp://127.0.0.1:1": scheme "ftp" is not supported`,
				`flags: -backends: "http://127.0.0.1:2/x": a path ("/x") is not supported`,
			}},
		{"duplicate backends", Overlay{Backends: []string{"http://127.0.0.1:1", "http://127.0.0.1:01"}},
			[]string{`flags: -backends: "http://127.0.0.1:01" duplicates the backend at "http://127.0.0.1:1"`}},
		{"port out of range", Overlay{Port: 70000}, []string{"flags: -port: must be between 1 and 65535, got 70000"}},
		{"negative port", Overlay{Port: -1}, []string{"flags: -port: must not be negative, got -1"}},
		{"bad listen", Overlay{Listen: "nowhere"}, []string{`flags: -listen: "nowhere" is not HOST:PORT`}},
		{"unknown algorithm", Overlay{Algorithm: "fastest"}, []string{`flags: -algorithm: unknown algorithm "fastest"; known: round-robin`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, fileWithPort)
			before := *c
			err := c.Apply(tt.overlay, testOpts)
			ps := problems(t, err)
			if len(ps) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tt.want), err)
			}
			lines := strings.Split(err.Error(), "\n")
			for _, w := range tt.want {
				found := false
				for _, l := range lines {
					found = found || strings.HasPrefix(l, w)
				}
				if !found {
					t.Errorf("missing %q in\n%v", w, err)
				}
			}
			if c.Port != before.Port || c.Listen != before.Listen || c.Algorithm != before.Algorithm || len(c.Backends) != len(before.Backends) {
				t.Errorf("failed Apply changed the config: %+v", c)
			}
		})
	}
}

// TestFileAndFlagProblemsTogether: LoadOverlay reports a bad file and bad
// flags in one go, the file's first.
func TestFileAndFlagProblemsTogether(t *testing.T) {
	path := t.TempDir() + "/relay.yml"
	if err := writeFile(path, "port: 8080\nworkers: -1\n"); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOverlay(path, Overlay{Backends: []string{"ftp://x"}}, testOpts)
	ps := problems(t, err)
	if len(ps) != 2 || ps[0].File != path || ps[0].Line != 2 || ps[1].File != FlagsFile {
		t.Errorf("got\n%v", err)
	}
}
