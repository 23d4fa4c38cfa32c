package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCheckWarnsOfIgnoredWeights: relay -check accepts backends whose
// weights differ under round-robin, which ignores them, exits 0, and says
// so on standard error at the weight's line; the ok line counts the
// warning. Under weighted-round-robin it has nothing to say.
func TestCheckWarnsOfIgnoredWeights(t *testing.T) {
	t.Parallel()
	backends := "backends:\n  - url: http://127.0.0.1:8001\n  - url: http://127.0.0.1:8002\n    weight: 3\n"
	path := writeFile(t, t.TempDir(), "relay.yml", backends)
	code, stdout, stderr := runRelay(t, "-check", "-config", path)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (a warning is no error); stderr:\n%s", code, stderr)
	}
	if want := path + ": ok (2 backends, round-robin), 1 warning\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	want := path + ":4: warning: backends[1].weight: weight 3 differs from the first backend's (1), " +
		"but algorithm round-robin (the default) ignores them: every backend gets the same share; set algorithm: weighted-round-robin"
	if !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr:\n%s\nwant one line starting\n%s", stderr, want)
	}

	path = writeFile(t, t.TempDir(), "relay.yml", "algorithm: weighted-round-robin\n"+backends)
	code, stdout, stderr = runRelay(t, "-check", "-config", path)
	if code != 0 || strings.TrimSpace(stderr) != "" || !strings.HasSuffix(stdout, "ok (2 backends, weighted-round-robin)\n") {
		t.Errorf("weighted-round-robin: exit %d, stdout %q, stderr %q; want 0, ok and no warning", code, stdout, stderr)
	}
}

// TestIgnoredWeightsLoggedAndShown: relay started with weights that its
// algorithm ignores logs one warning (the control, not each process),
// the admin API says weights_ignored with the warning in words; a reload
// to weighted-round-robin clears it, and a reload to random, which
// ignores weights too, logs the warning again.
func TestIgnoredWeightsLoggedAndShown(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		bs := newBackends(t, 2)
		head := fmt.Sprintf("listen: 127.0.0.1:0\nprocesses: %d\naccess_log: false\n", processes)
		body := backendsYAML(urlsOf(bs), 1, 4)
		file := writeFile(t, t.TempDir(), "relay.yml", head+body)
		r, started := startRelay(t, "", "-config", file)
		admin := adminOf(t, started)
		warned := func(alg string) logLine {
			t.Helper()
			l, ok := r.waitLog(10*time.Second, func(l logLine) bool {
				return l.Msg() == "configuration warning" && l.Str("level") == "WARN" && strings.Contains(l.Str("warning"), alg)
			})
			if !ok {
				t.Fatalf("no configuration warning naming %s; log:\n%s", alg, r.stdout.text())
			}
			return l
		}
		w := warned("round-robin")
		if got := w.Str("warning"); !strings.Contains(got, "backends[1].weight: weight 4 differs") || !strings.Contains(got, "round-robin (the default) ignores them") {
			t.Errorf("warning %q", got)
		}
		listing := func() (bool, string) {
			t.Helper()
			code, v := adminCall(t, admin, "GET", "/api/backends", "")
			if code != 200 {
				t.Fatalf("GET /api/backends: %d %v", code, v)
			}
			ignored, _ := v["weights_ignored"].(bool)
			return ignored, fmt.Sprint(v["warnings"])
		}
		if ignored, warnings := listing(); !ignored || !strings.Contains(warnings, "algorithm round-robin ignores them") {
			t.Errorf("admin API: weights_ignored %v, warnings %s; want true and the warning", ignored, warnings)
		}

		reload := func(alg string, gen int) {
			t.Helper()
			if err := writeFileAtomic(file, head+"algorithm: "+alg+"\n"+body); err != nil {
				t.Fatal(err)
			}
			r.signal(syscall.SIGHUP)
			waitReload(t, r, gen)
		}
		reload("weighted-round-robin", 2)
		if ignored, warnings := listing(); ignored || warnings != "[]" {
			t.Errorf("after the reload to weighted-round-robin: weights_ignored %v, warnings %s; want false and []", ignored, warnings)
		}
		reload("random", 3)
		warned("algorithm random")
		if ignored, _ := listing(); !ignored {
			t.Error("after the reload to random: weights_ignored false, want true")
		}
		var lines []string
		for _, l := range r.logs() {
			if l.Msg() == "configuration warning" {
				lines = append(lines, l.Str("warning"))
			}
		}
		// One at start, one after the reload to random.
		if len(lines) != 2 || !strings.Contains(lines[1], "algorithm random ignores them") {
			t.Errorf("warning lines %q; want one at start and one naming random after its reload", lines)
		}
		r.stop()
	})
}

// waitReload waits for the reload line of generation gen.
func waitReload(t *testing.T, r *relay, gen int) logLine {
	t.Helper()
	l, ok := r.waitLog(10*time.Second, func(l logLine) bool {
		return l.Msg() == "configuration reloaded" && l.Num("generation") == gen
	})
	if !ok {
		t.Fatalf("no reload line for generation %d; log:\n%s", gen, r.stdout.text())
	}
	return l
}
