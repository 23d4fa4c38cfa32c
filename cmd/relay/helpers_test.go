package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"relay/demo"
	"relay/internal/testaddr"
)

// relayBin is the relay binary TestMain builds; every test runs it as a
// child process, so flags, signals, exit codes and output are the real ones.
var relayBin string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "relay-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "temp dir for the relay binary:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	relayBin = filepath.Join(dir, "relay")
	args := []string{"build", "-o", relayBin}
	if raceEnabled {
		// A race-enabled relay turns every data race the end-to-end tests
		// provoke into exit status 66, which the exit-code checks catch.
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build relay: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// Time limits for the child process. Startup includes one round of health
// checks; the race detector makes everything several times slower.
const (
	startTimeout = 15 * time.Second
	exitTimeout  = 10 * time.Second
)

// lines collects what a child writes to one stream, split into lines, and
// lets a test wait for a line it expects.
type lines struct {
	mu      sync.Mutex
	all     []string
	partial []byte
	changed chan struct{} // closed and replaced whenever a line is added
}

func newLines() *lines { return &lines{changed: make(chan struct{})} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	added := false
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.all = append(l.all, string(l.partial[:i]))
		l.partial = l.partial[i+1:]
		added = true
	}
	if added {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	return len(p), nil
}

// snapshot returns the complete lines so far and a channel closed when more arrive.
func (l *lines) snapshot() ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all[:len(l.all):len(l.all)], l.changed
}

// text is everything written so far, the unterminated tail included.
func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.all, "\n") + "\n" + string(l.partial)
}

// relay is one running relay process.
type relay struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout *lines
	stderr *lines
	done   chan struct{} // closed once the process has exited and its output is read
	// addr is 127.0.0.1 with the port relay reported listening on; set by
	// startRelay.
	addr string
}

// launchRelay starts relay with args in dir (a temp dir when empty, so no
// stray config.yml is picked up) and returns without waiting for it to
// listen. The process is killed at cleanup if it is still running.
func launchRelay(t *testing.T, dir string, args ...string) *relay {
	t.Helper()
	return launchRelayUnder(t, dir, nil, args...)
}

// launchRelayUnder is launchRelay with relay started by the command in
// wrap, such as prlimit, which execs it in its place.
func launchRelayUnder(t *testing.T, dir string, wrap []string, args ...string) *relay {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	r := &relay{t: t, stdout: newLines(), stderr: newLines(), done: make(chan struct{})}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "-admin-listen") }) {
		// The default admin port is one for the whole machine; tests
		// running side by side each take a free one.
		args = append([]string{"-admin-listen=127.0.0.1:0"}, args...)
	}
	argv := append(append(slices.Clone(wrap), relayBin), args...)
	r.cmd = exec.Command(argv[0], argv[1:]...)
	r.cmd.Dir = dir
	// A race-enabled binary sleeps a second before exiting by default, which
	// would count against relay's shutdown time.
	r.cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	r.cmd.Stdout = r.stdout
	r.cmd.Stderr = r.stderr
	// Standard input is a pipe that stays open and empty, as a terminal
	// nobody types into: relay must never wait on it (certmagic asks
	// there for an email when an order is made interactively).
	stdin, typist, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { typist.Close() })
	r.cmd.Stdin = stdin
	r.cmd.WaitDelay = 5 * time.Second
	err = r.cmd.Start()
	stdin.Close()
	if err != nil {
		t.Fatalf("start relay: %v", err)
	}
	go func() {
		r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		select {
		case <-r.done:
			return
		default:
		}
		r.cmd.Process.Kill()
		select {
		case <-r.done:
		case <-time.After(exitTimeout):
			t.Errorf("relay pid %d did not exit after SIGKILL", r.cmd.Process.Pid)
		}
	})
	return r
}

// startRelay launches relay and waits for its "relay started" log line on
// stdout, failing the test if relay exits first.
func startRelay(t *testing.T, dir string, args ...string) (*relay, logLine) {
	t.Helper()
	return startRelayUnder(t, dir, nil, args...)
}

// startRelayUnder is startRelay with relay started by the command in
// wrap (launchRelayUnder).
func startRelayUnder(t *testing.T, dir string, wrap []string, args ...string) (*relay, logLine) {
	t.Helper()
	r := launchRelayUnder(t, dir, wrap, args...)
	started, ok := r.waitLog(startTimeout, func(l logLine) bool { return l.Msg() == "relay started" })
	if !ok {
		t.Fatalf("relay %v did not report starting\nstdout:\n%s\nstderr:\n%s", args, r.stdout.text(), r.stderr.text())
	}
	_, port, err := net.SplitHostPort(started.Str("listen"))
	if err != nil {
		t.Fatalf("relay started line has no usable listen address: %v", started)
	}
	r.addr = net.JoinHostPort("127.0.0.1", port)
	return r, started
}

// waitLine waits up to timeout for a stdout line that match accepts and
// returns it; false means the time ran out or relay exited without one.
func (r *relay) waitLine(timeout time.Duration, match func(string) bool) (string, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	seen := 0
	for {
		all, changed := r.stdout.snapshot()
		for _, l := range all[seen:] {
			if match(l) {
				return l, true
			}
		}
		seen = len(all)
		select {
		case <-changed:
		case <-r.done:
			// Output is complete once the process is gone; one last look.
			all, _ := r.stdout.snapshot()
			for _, l := range all[seen:] {
				if match(l) {
					return l, true
				}
			}
			return "", false
		case <-deadline.C:
			return "", false
		}
	}
}

// waitLog is waitLine for JSON log lines.
func (r *relay) waitLog(timeout time.Duration, match func(logLine) bool) (logLine, bool) {
	var found logLine
	_, ok := r.waitLine(timeout, func(s string) bool {
		l := parseLogLine(s)
		if l != nil && match(l) {
			found = l
			return true
		}
		return false
	})
	return found, ok
}

// logs returns the JSON lines relay has written to stdout so far.
func (r *relay) logs() []logLine {
	all, _ := r.stdout.snapshot()
	var out []logLine
	for _, s := range all {
		if l := parseLogLine(s); l != nil {
			out = append(out, l)
		}
	}
	return out
}

func (r *relay) signal(sig os.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("signal %v to relay: %v", sig, err)
	}
}

// wait waits up to timeout for relay to exit and returns its exit code.
func (r *relay) wait(timeout time.Duration) (code int, exited bool) {
	select {
	case <-r.done:
		return r.cmd.ProcessState.ExitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// stop sends SIGTERM and requires a clean exit.
func (r *relay) stop() {
	r.t.Helper()
	r.signal(syscall.SIGTERM)
	code, ok := r.wait(exitTimeout)
	if !ok {
		r.t.Fatalf("relay did not exit within %v of SIGTERM", exitTimeout)
	}
	if code != 0 {
		r.t.Fatalf("relay exited with %d after SIGTERM; stderr:\n%s", code, r.stderr.text())
	}
}

// url is the address of path on relay.
func (r *relay) url(path string) string { return "http://" + r.addr + path }

// runRelay runs relay to completion, as for -check, -h and bad input.
func runRelay(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	r := launchRelay(t, "", args...)
	code, ok := r.wait(exitTimeout)
	if !ok {
		t.Fatalf("relay %v still running after %v", args, exitTimeout)
	}
	return code, r.stdout.text(), r.stderr.text()
}

// logLine is one decoded JSON log line.
type logLine map[string]any

func parseLogLine(s string) logLine {
	var l logLine
	if json.Unmarshal([]byte(s), &l) != nil {
		return nil
	}
	return l
}

func (l logLine) Msg() string { return l.Str("msg") }

func (l logLine) Str(key string) string {
	s, _ := l[key].(string)
	return s
}

// Num is a numeric field, -1 when it is missing or not a number.
func (l logLine) Num(key string) int {
	f, ok := l[key].(float64)
	if !ok {
		return -1
	}
	return int(f)
}

// backendServer is one demo backend in the test process.
type backendServer struct {
	srv    *httptest.Server
	port   string
	url    string
	health *demo.Health
	hello  string // the body of GET /
}

// newBackend starts a demo backend on 127.0.0.1 that names its real port in
// its greeting, so a response body tells which backend answered. wrap, when
// not nil, sees every request before the demo handler.
func newBackend(t *testing.T, wrap func(http.Handler) http.Handler) *backendServer {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	b := &backendServer{srv: srv, port: port, health: new(demo.Health),
		hello: "Hello World from " + port + " server\n"}
	var h http.Handler = demo.Handler(port, b.health)
	if wrap != nil {
		h = wrap(h)
	}
	srv.Config.Handler = h
	srv.Start()
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

func newBackends(t *testing.T, n int) []*backendServer {
	t.Helper()
	bs := make([]*backendServer, n)
	for i := range bs {
		bs[i] = newBackend(t, nil)
	}
	return bs
}

// backendsYAML is a backends: list; weights, when given, go with urls in order.
func backendsYAML(urls []string, weights ...int) string {
	var b strings.Builder
	b.WriteString("backends:\n")
	for i, u := range urls {
		fmt.Fprintf(&b, "  - url: %s\n", u)
		if i < len(weights) {
			fmt.Fprintf(&b, "    weight: %d\n", weights[i])
		}
	}
	return b.String()
}

func urlsOf(bs []*backendServer) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.url
	}
	return out
}

// writeFile writes content to name in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeConfig writes a configuration listening on a port the system picks,
// logging at info, followed by extra (other keys and the backends list).
func writeConfig(t *testing.T, extra string) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "relay.yml", "listen: 127.0.0.1:0\nlog_level: info\n"+extra)
}

// forProcesses runs test as two parallel subtests, relay with processes: 1
// and with processes: 2: what must behave as one relay is checked both ways.
func forProcesses(t *testing.T, test func(t *testing.T, processes int)) {
	for _, processes := range []int{1, 2} {
		t.Run(fmt.Sprintf("processes=%d", processes), func(t *testing.T) {
			t.Parallel()
			test(t, processes)
		})
	}
}

// freePort returns a port nothing listens on, outside the ephemeral range
// (testaddr.FreePort).
func freePort(t *testing.T) string { return testaddr.FreePort(t) }

// newClient is a keep-alive HTTP client with a bound on every request.
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// get sends GET url and returns the status and body.
func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// sequence sends n sequential GET / requests through relay and returns the
// answering backends' greetings, failing on any status but 200.
func sequence(t *testing.T, c *http.Client, r *relay, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		code, body := get(t, c, r.url("/"))
		if code != http.StatusOK {
			t.Fatalf("request %d: status %d, body %q", i, code, body)
		}
		out[i] = body
	}
	return out
}

// waitFile polls path until its content satisfies ok. A file written by
// another process offers nothing to wait on, hence the polling.
func waitFile(t *testing.T, path string, timeout time.Duration, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(path)
		if ok(string(b)) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reach the expected content within %v; it holds:\n%s", path, timeout, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeFileAtomic replaces path's content in one rename, so a reload never
// reads a half-written file.
func writeFileAtomic(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// processTree is pid and its descendants: relay and its serving
// processes. /proc/PID/task/TID/children lists the children that thread
// started, and the Go runtime starts a child from whichever thread runs
// the goroutine, so every thread's list is read.
func processTree(pid int) []int {
	pids := []int{pid}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, processTree(n)...)
			}
		}
	}
	return pids
}
