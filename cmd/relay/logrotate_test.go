package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogrotateExample runs logrotate with examples/relay.logrotate, its
// paths moved to a temporary directory and its postrotate signal sent to
// the test's relay, twice, with one serving process and with two: each
// rotation leaves the lines before it in the rotated file and those after
// it in a new file relay made, the older rotation is compressed, and
// relay's own rotation leaves nothing beside them.
func TestLogrotateExample(t *testing.T) {
	bin, err := exec.LookPath("logrotate")
	if err != nil {
		t.Skip("logrotate is not installed")
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "relay.logrotate"))
	if err != nil {
		t.Fatal(err)
	}
	const signal = "systemctl kill --signal=SIGUSR1 --kill-who=main relay.service"
	if !strings.Contains(string(example), signal) {
		t.Fatalf("examples/relay.logrotate no longer signals with %q; update this test", signal)
	}
	forProcesses(t, func(t *testing.T, processes int) {
		b := newBackend(t, nil)
		r, logFile := fileLogRelay(t, b, fmt.Sprintf("processes: %d\n", processes))
		dir := filepath.Dir(logFile)
		conf := strings.NewReplacer(
			"/var/log/relay/relay.log", logFile,
			"/var/log/relay/access.log", filepath.Join(dir, "access.log"),
			signal, fmt.Sprintf("kill -USR1 %d", r.cmd.Process.Pid),
		).Replace(string(example))
		confFile := filepath.Join(dir, "logrotate.conf")
		if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		c := newClient(t)
		request := func(path string) {
			t.Helper()
			if code, _ := get(t, c, r.url(path)); code != 200 {
				t.Fatalf("GET %s: status %d", path, code)
			}
			waitFile(t, logFile, logWait, hasAccess(path))
		}
		rotate := func() {
			t.Helper()
			out, err := exec.Command(bin, "-f", "-s", filepath.Join(dir, "state"), confFile).CombinedOutput()
			if err != nil {
				t.Fatalf("logrotate: %v\n%s", err, out)
			}
			// nocreate: the file at the path is relay's, made when it
			// handled the signal.
			waitFile(t, logFile, logWait, func(string) bool {
				_, err := os.Stat(logFile)
				return err == nil
			})
		}

		request("/first")
		rotate()
		request("/second")
		if s := readFile(t, logFile+".1"); !hasAccess("/first")(s) || hasAccess("/second")(s) {
			t.Errorf("%s.1 after the first rotation:\n%s", logFile, s)
		}
		rotate()
		request("/third")
		if s := readFile(t, logFile+".1"); !hasAccess("/second")(s) || hasAccess("/third")(s) {
			t.Errorf("%s.1 after the second rotation:\n%s", logFile, s)
		}
		if _, err := os.Stat(logFile + ".2.gz"); err != nil {
			t.Errorf("the first rotation is not compressed after the second: %v", err)
		}
		if s := readFile(t, logFile); hasAccess("/first")(s) || hasAccess("/second")(s) {
			t.Errorf("%s holds lines from before the rotations:\n%s", logFile, s)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "lb-*.log")); len(m) > 0 {
			t.Errorf("relay moved files aside besides logrotate: %v", m)
		}
	})
}
