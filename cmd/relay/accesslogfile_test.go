package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAccessLogFile: with access_log_file, access lines go to that file,
// with the user agent, referer, request id and upstream times, and
// operational lines (start, reload, stop) stay in log_file, as one process
// and as two. SIGUSR1 after the access file was renamed (what logrotate
// does) makes every process let go of the renamed file and write a new one.
func TestAccessLogFile(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		b := newBackend(t, nil)
		dir := t.TempDir()
		accessFile := filepath.Join(dir, "access.log")
		r, logFile := fileLogRelayIn(t, dir, b, fmt.Sprintf("processes: %d\naccess_log_file: %s\n", processes, accessFile))
		c := newClient(t)
		request := func(path string) string {
			t.Helper()
			req, _ := http.NewRequest("GET", r.url(path), nil)
			req.Header.Set("User-Agent", "file-agent/1.0")
			req.Header.Set("Referer", "https://example.test/from")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s: status %d", path, resp.StatusCode)
			}
			return resp.Header.Get("X-Request-Id")
		}

		id := request("/to-access-file")
		text := waitFile(t, accessFile, logWait, hasAccess("/to-access-file"))
		l := parseLogLine(strings.TrimSpace(text))
		if l == nil || l.Str("user_agent") != "file-agent/1.0" || l.Str("referer") != "https://example.test/from" ||
			l.Str("request_id") != id || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(id) {
			t.Fatalf("access line %q; want the user agent, the referer and the request id %q the client got", text, id)
		}
		if _, ok := l["upstream_connect_ms"]; !ok {
			t.Errorf("access line %q has no upstream_connect_ms", text)
		}
		if _, ok := l["upstream_response_ms"]; !ok {
			t.Errorf("access line %q has no upstream_response_ms", text)
		}

		r.signal(syscall.SIGHUP)
		waitFile(t, logFile, logWait, func(s string) bool { return strings.Contains(s, `"msg":"configuration reloaded"`) })

		// What logrotate does: rename the file, then signal relay.
		moved := accessFile + ".1"
		if err := os.Rename(accessFile, moved); err != nil {
			t.Fatal(err)
		}
		r.signal(syscall.SIGUSR1)
		deadline := time.Now().Add(logWait)
		for holder := holding(r, moved); holder != 0; holder = holding(r, moved) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still holds the renamed %s %v after SIGUSR1", holder, moved, logWait)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for i := range 4 { // over new connections, so both processes are likely asked
			c.CloseIdleConnections()
			request(fmt.Sprintf("/after-rename-%d", i))
		}
		for i := range 4 {
			waitFile(t, accessFile, logWait, hasAccess(fmt.Sprintf("/after-rename-%d", i)))
		}
		if strings.Contains(readFile(t, moved), "/after-rename") {
			t.Errorf("relay kept writing to the renamed %s", moved)
		}
		r.stop()

		// Every line of the access files is an access line, and none of
		// log_file's (and of its rotated files') is.
		accessFiles, _ := filepath.Glob(filepath.Join(dir, "access*"))
		logFiles, _ := filepath.Glob(filepath.Join(dir, "lb*.log"))
		var ops strings.Builder
		for _, f := range logFiles {
			ops.WriteString(readFile(t, f))
		}
		for _, want := range []string{"relay started", "configuration reloaded", "stopped"} {
			if !strings.Contains(ops.String(), `"msg":"`+want+`"`) {
				t.Errorf("%v hold no %q line", logFiles, want)
			}
		}
		if strings.Contains(ops.String(), `"msg":"access"`) {
			t.Errorf("%v hold access lines though access_log_file is set", logFiles)
		}
		for _, f := range accessFiles {
			for _, line := range strings.Split(strings.TrimSpace(readFile(t, f)), "\n") {
				if l := parseLogLine(line); line != "" && (l == nil || !isAccess(l)) {
					t.Errorf("%s holds a line that is not an access line: %q", f, line)
				}
			}
		}
	})
}

// holding returns the pid of a process of r (relay or a serving process)
// that has path open, 0 if none has.
func holding(r *relay, path string) int {
	for _, pid := range processTree(r.cmd.Process.Pid) {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && target == path {
				return pid
			}
		}
	}
	return 0
}

// TestAccessLogFileCombined: access_log_format: combined writes nginx's
// combined lines, with relay's fields after them, to access_log_file.
func TestAccessLogFileCombined(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	dir := t.TempDir()
	accessFile := filepath.Join(dir, "access.log")
	r, _ := fileLogRelayIn(t, dir, b, "access_log_format: combined\naccess_log_file: "+accessFile+"\n")
	c := newClient(t)
	req, _ := http.NewRequest("GET", r.url("/combined?q=1"), nil)
	req.Header.Set("User-Agent", `agent "quoted"`)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	want := regexp.MustCompile(`^127\.0\.0\.1 - - \[[^\]]+\] "GET /combined\?q=1 HTTP/1\.1" 200 \d+ "-" "agent \\x22quoted\\x22" ` +
		`rid="` + id + `" upstream="` + regexp.QuoteMeta(b.url) + `" pool="default" route="-" rt=\d+\.\d{3} uct=\d+\.\d{3} urt=\d+\.\d{3}$`)
	text := waitFile(t, accessFile, logWait, func(s string) bool { return strings.Contains(s, "/combined") })
	if line := strings.TrimSpace(text); !want.MatchString(line) {
		t.Errorf("access line\n%s\nwant one matching\n%s", line, want)
	}
}
