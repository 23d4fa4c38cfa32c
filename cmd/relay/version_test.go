package main

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// The version a release build stamps, through the same -X names
// build/release.sh sets.
const (
	stampVersion = "v9.8.7-test"
	stampCommit  = "0123456789abcdef0123456789abcdef01234567"
	stampDate    = "2026-11-26T16:00:00Z"
)

var stamped struct {
	once sync.Once
	bin  string
	err  error
}

// stampedRelay builds relay once as a release build does, with its version,
// commit and date set by the linker.
func stampedRelay(t *testing.T) string {
	t.Helper()
	stamped.once.Do(func() {
		stamped.bin = filepath.Join(filepath.Dir(relayBin), "relay-stamped")
		const pkg = "relay/internal/version"
		ldflags := fmt.Sprintf("-X %s.version=%s -X %s.commit=%s -X %s.date=%s", pkg, stampVersion, pkg, stampCommit, pkg, stampDate)
		out, err := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", stamped.bin, ".").CombinedOutput()
		if err != nil {
			stamped.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if stamped.err != nil {
		t.Fatal(stamped.err)
	}
	return stamped.bin
}

// runStamped is the argument list that makes launchRelayUnder start the
// stamped binary in place of relayBin: sh drops relayBin and execs it.
func runStamped(t *testing.T) []string {
	return []string{"sh", "-c", `shift; exec "$0" "$@"`, stampedRelay(t)}
}

func TestVersionFlag(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(stampedRelay(t), "-version").Output()
	if err != nil {
		t.Fatalf("relay -version: %v", err)
	}
	want := fmt.Sprintf("relay %s (commit 0123456789ab, built %s, ", stampVersion, stampDate)
	if s := string(out); !strings.HasPrefix(s, want) || strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, ")\n") {
		t.Errorf("relay -version printed %q, want one line starting %q", s, want)
	}
	// A build without -X still prints one line and exits 0.
	out, err = exec.Command(relayBin, "-version").Output()
	if err != nil || !strings.HasPrefix(string(out), "relay ") || strings.Count(string(out), "\n") != 1 {
		t.Errorf("unstamped relay -version: %q, %v", out, err)
	}
}

// TestBuildInfoMetric: /metrics carries relay_build_info once, as one
// relay, with the stamped version and commit, with one serving process and
// with two; the start line names the version; and the whole output passes
// the checks promtool check metrics makes (promlint).
func TestBuildInfoMetric(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		b := newBackend(t, nil)
		cfg := writeConfig(t, fmt.Sprintf("processes: %d\n", processes)+backendsYAML([]string{b.url}))
		_, started := startRelayUnder(t, "", runStamped(t), "-config", cfg)
		if v := started.Str("version"); v != stampVersion {
			t.Errorf("start line version %q, want %q: %v", v, stampVersion, started)
		}
		resp, err := http.Get(adminOf(t, started) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		text := string(body)
		var samples []string
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(line, "relay_build_info") {
				samples = append(samples, line)
			}
		}
		want := `relay_build_info{goversion="go`
		if len(samples) != 1 || !strings.HasPrefix(samples[0], want) ||
			!strings.Contains(samples[0], `revision="`+stampCommit+`"`) ||
			!strings.Contains(samples[0], `version="`+stampVersion+`"`) || !strings.HasSuffix(samples[0], "} 1") {
			t.Errorf("relay_build_info samples %q, want exactly one, value 1, with the stamped version and commit", samples)
		}
		for _, meta := range []string{"# HELP relay_build_info ", "# TYPE relay_build_info gauge\n"} {
			if strings.Count(text, meta) != 1 {
				t.Errorf("%q appears %d times, want once", meta, strings.Count(text, meta))
			}
		}
		problems, err := promlint.New(strings.NewReader(text)).Lint()
		if err != nil {
			t.Fatalf("the metrics do not parse: %v", err)
		}
		for _, p := range problems {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	})
}
