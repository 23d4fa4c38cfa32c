package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"relay/internal/logging"
)

// logWait bounds how long a log line may take to appear; the access log
// flushes every 100ms when traffic is light.
const logWait = 5 * time.Second

func isAccess(l logLine) bool { return l.Msg() == "access" }

func TestAccessLogOnStdout(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	r, _ := startRelay(t, "", "-config", writeConfig(t, "access_log: true\n"+backendsYAML([]string{b.url})))
	c := newClient(t)
	requests := []struct {
		method, path string
		status       int
	}{
		{http.MethodGet, "/first?x=1", 200},
		{http.MethodPost, "/second", 200},
		{http.MethodGet, "/third?status=404", 404},
	}
	for _, req := range requests {
		rq, _ := http.NewRequest(req.method, r.url(req.path), strings.NewReader("body"))
		resp, err := c.Do(rq)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != req.status {
			t.Fatalf("%s %s = %d, want %d", req.method, req.path, resp.StatusCode, req.status)
		}
	}
	for _, req := range requests {
		l, ok := r.waitLog(logWait, func(l logLine) bool { return isAccess(l) && l.Str("path") == req.path })
		if !ok {
			t.Fatalf("no access line for %s %s", req.method, req.path)
		}
		if l.Str("method") != req.method || l.Num("status") != req.status || l.Str("backend") != b.url ||
			l.Str("client") == "" || l.Str("time") == "" {
			t.Errorf("access line %v, want method %s, status %d, backend %s, a client and a time",
				l, req.method, req.status, b.url)
		}
	}
	r.stop()
	var n int
	for _, l := range r.logs() {
		if isAccess(l) {
			n++
		}
	}
	if n != len(requests) {
		t.Errorf("%d access lines for %d requests", n, len(requests))
	}
}

func TestAccessLogOff(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	r, _ := startRelay(t, "", "-config", writeConfig(t, "access_log: false\n"+backendsYAML([]string{b.url})))
	sequence(t, newClient(t), r, 5)
	// After a clean exit every buffered line has been written, so absence
	// now means none was ever made.
	r.stop()
	if _, ok := r.waitLog(0, func(l logLine) bool { return l.Msg() == "stopped" }); !ok {
		t.Fatalf("no \"stopped\" line; stdout:\n%s", r.stdout.text())
	}
	for _, l := range r.logs() {
		if isAccess(l) {
			t.Errorf("access line with access_log false: %v", l)
		}
	}
}

// fileLogRelay starts relay logging to dir/lb.log on a port of its own
// (stdout carries nothing to learn the port from), with extra configuration
// lines, and waits until it listens.
func fileLogRelay(t *testing.T, b *backendServer, extra string) (r *relay, logFile string) {
	t.Helper()
	return fileLogRelayIn(t, t.TempDir(), b, extra)
}

// fileLogRelayIn is fileLogRelay with the files in dir.
func fileLogRelayIn(t *testing.T, dir string, b *backendServer, extra string) (r *relay, logFile string) {
	t.Helper()
	logFile = filepath.Join(dir, "lb.log")
	port := freePort(t)
	cfg := writeFile(t, dir, "relay.yml", "listen: 127.0.0.1:"+port+"\nlog_file: "+logFile+
		"\naccess_log: true\nlog_level: info\n"+extra+backendsYAML([]string{b.url}))
	r = launchRelay(t, dir, "-config", cfg)
	waitFile(t, logFile, startTimeout, func(s string) bool { return strings.Contains(s, `"msg":"relay started"`) })
	r.addr = "127.0.0.1:" + port
	return r, logFile
}

// hasAccess reports whether log text holds an access line for path.
func hasAccess(path string) func(string) bool {
	return func(s string) bool {
		for _, line := range strings.Split(s, "\n") {
			if l := parseLogLine(line); l != nil && isAccess(l) && l.Str("path") == path {
				return true
			}
		}
		return false
	}
}

func TestLogFileInsteadOfStdout(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	r, logFile := fileLogRelay(t, b, "")
	c := newClient(t)
	if code, _ := get(t, c, r.url("/to-file")); code != 200 {
		t.Fatalf("status %d", code)
	}
	waitFile(t, logFile, logWait, hasAccess("/to-file"))
	r.stop()
	if out := strings.TrimSpace(r.stdout.text()); out != "" {
		t.Errorf("stdout has output though log_file is set:\n%s", out)
	}
	waitFile(t, logFile, 0, func(s string) bool { return strings.Contains(s, `"msg":"stopped"`) })
}

func TestSIGUSR1ReopensLogFile(t *testing.T) {
	t.Parallel()
	testSIGUSR1ReopensLogFile(t, "")
}

// With several processes the supervisor owns the log file; SIGUSR1 to it
// must rotate what the serving processes write too.
func TestProcessesSIGUSR1ReopensLogFile(t *testing.T) {
	t.Parallel()
	testSIGUSR1ReopensLogFile(t, "processes: 2\n")
}

func testSIGUSR1ReopensLogFile(t *testing.T, extra string) {
	b := newBackend(t, nil)
	r, logFile := fileLogRelay(t, b, extra)
	dir := filepath.Dir(logFile)
	c := newClient(t)
	request := func(path string) {
		t.Helper()
		if code, _ := get(t, c, r.url(path)); code != 200 {
			t.Fatalf("GET %s: status %d", path, code)
		}
	}
	backups := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, "lb-*.log"))
		return m
	}

	// Rotation in place.
	{
		request("/before")
		waitFile(t, logFile, logWait, hasAccess("/before"))
		r.signal(syscall.SIGUSR1)
		// relay moves the full file aside under a timestamped name.
		deadline := time.Now().Add(logWait)
		for len(backups()) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no rotated file beside %s after SIGUSR1", logFile)
			}
			time.Sleep(20 * time.Millisecond)
		}
		old := backups()[0]
		waitFile(t, old, 0, hasAccess("/before"))
		request("/after")
		fresh := waitFile(t, logFile, logWait, hasAccess("/after"))
		if hasAccess("/before")(fresh) || strings.Contains(fresh, "relay started") {
			t.Errorf("the new %s holds lines from before the rotation:\n%s", logFile, fresh)
		}
		if hasAccess("/after")(readFile(t, old)) {
			t.Errorf("the rotated %s still receives lines", old)
		}
	}

	// What logrotate does: rename the file, then signal relay to let go of it.
	{
		moved := logFile + ".1"
		if err := os.Rename(logFile, moved); err != nil {
			t.Fatal(err)
		}
		r.signal(syscall.SIGUSR1)
		// relay creates the file anew when it handles the signal.
		waitFile(t, logFile, logWait, func(string) bool {
			_, err := os.Stat(logFile)
			return err == nil
		})
		request("/renamed")
		waitFile(t, logFile, logWait, hasAccess("/renamed"))
		if hasAccess("/renamed")(readFile(t, moved)) {
			t.Errorf("relay kept writing to the renamed %s", moved)
		}
	}

	r.stop()
	if _, err := os.Stat(logFile); err != nil {
		t.Errorf("log file gone after exit: %v", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestProcessesAppendAndRotateOneLogFile: with two processes appending
// their access lines to the log file themselves and the supervisor
// rotating it by size, no line is lost, split or interleaved, and the
// file is rotated.
func TestProcessesAppendAndRotateOneLogFile(t *testing.T) {
	t.Parallel()
	testProcessesAppendAndRotate(t, false)
}

// TestProcessesAppendAndRotateAccessLogFile: the same with access lines
// in access_log_file, which the supervisor rotates by size as it rotates
// log_file; log_file gets none of them.
func TestProcessesAppendAndRotateAccessLogFile(t *testing.T) {
	t.Parallel()
	testProcessesAppendAndRotate(t, true)
}

func testProcessesAppendAndRotate(t *testing.T, accessFile bool) {
	b := newBackend(t, nil)
	dir := t.TempDir()
	extra := "processes: 2\nlog_max_size_mb: 1\nlog_max_backups: 0\n"
	glob := filepath.Join(dir, "lb*.log")
	if accessFile {
		extra += "access_log_file: " + filepath.Join(dir, "access.log") + "\n"
		glob = filepath.Join(dir, "access*.log")
	}
	r, logFile := fileLogRelayIn(t, dir, b, extra)
	const clients, each = 20, 300 // about 1.6 MB of access lines
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for i := range each {
				resp, err := hc.Get(r.url(fmt.Sprintf("/c%d/r%d/%s", c, i, strings.Repeat("x", 100))))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	// Let the size check see the last lines, then stop: every line is out.
	time.Sleep(logging.RotateCheckEvery + 500*time.Millisecond)
	r.stop()
	files, _ := filepath.Glob(glob)
	if len(files) < 2 {
		t.Fatalf("log files %v: want the file rotated at 1 MB", files)
	}
	if accessFile {
		if text := readFile(t, logFile); strings.Contains(text, `"msg":"access"`) {
			t.Errorf("%s holds access lines though access_log_file is set", logFile)
		}
	}
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			// The file a rotation just started, which no line reached
			// before relay stopped: nothing to check.
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			l := parseLogLine(line)
			if l == nil {
				t.Fatalf("%s: line is not whole JSON: %.200q", f, line)
			}
			if isAccess(l) {
				if seen[l.Str("path")] {
					t.Fatalf("access line for %s written twice", l.Str("path"))
				}
				seen[l.Str("path")] = true
			}
		}
	}
	if len(seen) != clients*each {
		t.Fatalf("%d access lines across %d files, want %d", len(seen), len(files), clients*each)
	}
}
