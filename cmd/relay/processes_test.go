//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"relay/internal/supervisor"
)

// childPIDs waits for the "process started" line of each of n serving
// processes and returns their pids by index.
func childPIDs(t *testing.T, r *relay, n int) []int {
	t.Helper()
	pids := make([]int, n)
	for i := range pids {
		l, ok := r.waitLog(startTimeout, func(l logLine) bool {
			return l.Msg() == "process started" && l.Num("process") == i
		})
		if !ok {
			t.Fatalf("no \"process started\" line for process %d\nstdout:\n%s", i, r.stdout.text())
		}
		pids[i] = l.Num("pid")
	}
	return pids
}

// rawGet sends one GET on a new connection and returns the connection,
// still open, once the 200 response has been read.
func rawGet(t *testing.T, addr, path string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: relay\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		t.Fatalf("GET %s: %v", path, err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	return c
}

// clientConns counts the established TCP connections process pid holds
// whose local port is port, that is, the client connections it accepted.
func clientConns(t *testing.T, pid int, port string) int {
	t.Helper()
	p, _ := strconv.Atoi(port)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skipf("no /proc/net/tcp: %v", err)
	}
	accepted := map[string]bool{} // socket inodes
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 10 {
			continue
		}
		local := f[1][strings.IndexByte(f[1], ':')+1:]
		if lp, _ := strconv.ParseInt(local, 16, 32); int(lp) == p && f[3] == "01" {
			accepted["socket:["+f[9]+"]"] = true
		}
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, _ := os.Readlink(filepath.Join(dir, fd.Name())); accepted[target] {
			n++
		}
	}
	return n
}

// gone reports whether process pid has ended: it no longer exists, or it
// is a zombie waiting for a parent that does not reap it.
func gone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which is in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func TestProcessesShareTheListenAddress(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 3)
	r, started := startRelay(t, "", "-config", writeConfig(t, "processes: 2\nworkers: 1\n"+backendsYAML(urlsOf(bs))))
	if started.Num("processes") != 2 || started.Num("workers") != 1 {
		t.Fatalf("started line %v, want processes 2 and workers 1", started)
	}
	pids := childPIDs(t, r, 2)
	if pids[0] == pids[1] || pids[0] == r.cmd.Process.Pid {
		t.Fatalf("serving processes %v (supervisor %d): want two of their own", pids, r.cmd.Process.Pid)
	}
	// The kernel spreads connections by hash: 32 of them leave one process
	// without any with probability 2^-31.
	const n = 32
	for i := range n {
		c := rawGet(t, r.addr, "/conn"+strconv.Itoa(i))
		defer c.Close()
	}
	_, port, _ := net.SplitHostPort(r.addr)
	a, b := clientConns(t, pids[0], port), clientConns(t, pids[1], port)
	if a == 0 || b == 0 || a+b != n {
		t.Fatalf("processes hold %d and %d of %d client connections, want all of them, spread over both", a, b, n)
	}
	if got := clientConns(t, r.cmd.Process.Pid, port); got != 0 {
		t.Errorf("the supervisor holds %d client connections, want none", got)
	}
	r.stop()
	for i, pid := range pids {
		if !gone(pid) {
			t.Errorf("process %d (pid %d) still runs after relay stopped", i, pid)
		}
	}
}

func TestProcessesRestartWithoutRefusingConnections(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 2)
	r, _ := startRelay(t, "", "-config", writeConfig(t, "processes: 2\n"+backendsYAML(urlsOf(bs))))
	pids := childPIDs(t, r, 2)
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// New connections while process 0 is down: those the kernel hashes to
	// its socket wait in the socket's queue until the new process accepts.
	for i := range 16 {
		rawGet(t, r.addr, "/during"+strconv.Itoa(i)).Close()
	}
	l, ok := r.waitLog(startTimeout, func(l logLine) bool { return l.Msg() == "process exited; restarting it" })
	if !ok || l.Num("process") != 0 || l.Num("pid") != pids[0] {
		t.Fatalf("restart line %v, want process 0, pid %d", l, pids[0])
	}
	again, ok := r.waitLog(startTimeout, func(l logLine) bool {
		return l.Msg() == "process started" && l.Num("process") == 0 && l.Num("pid") != pids[0]
	})
	if !ok {
		t.Fatalf("process 0 was not restarted\nstdout:\n%s", r.stdout.text())
	}
	for i := range 16 {
		rawGet(t, r.addr, "/after"+strconv.Itoa(i)).Close()
	}
	r.stop()
	for _, pid := range []int{again.Num("pid"), pids[1]} {
		if !gone(pid) {
			t.Errorf("pid %d still runs after relay stopped", pid)
		}
	}
}

func TestProcessesWriteOneLogFile(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	r, logFile := fileLogRelay(t, b, "processes: 2\n")
	const n = 40
	for i := range n {
		rawGet(t, r.addr, "/p"+strconv.Itoa(i)).Close()
	}
	waitFile(t, logFile, logWait, hasAccess("/p"+strconv.Itoa(n-1)))
	r.stop()
	text := waitFile(t, logFile, 0, func(s string) bool { return strings.Contains(s, `"msg":"stopped"`) })
	paths := map[string]bool{}
	started := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		l := parseLogLine(line)
		if l == nil {
			t.Fatalf("log line is not whole JSON: %q", line)
		}
		switch {
		case isAccess(l):
			paths[l.Str("path")] = true
		case l.Msg() == "process started":
			started[l.Num("process")] = true
		}
	}
	if len(paths) != n || !started[0] || !started[1] {
		t.Errorf("log file has access lines for %d of %d paths and start lines for processes %v, want all", len(paths), n, started)
	}
	if out := strings.TrimSpace(r.stdout.text()); out != "" {
		t.Errorf("stdout has output though log_file is set:\n%s", out)
	}
}

func TestProcessesRefuseABusyAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := newBackend(t, nil)
	cfg := writeFile(t, t.TempDir(), "relay.yml", "listen: "+ln.Addr().String()+"\nprocesses: 2\n"+backendsYAML([]string{b.url}))
	code, _, stderr := runRelay(t, "-config", cfg)
	if code != 1 || !strings.Contains(stderr, "listen on "+ln.Addr().String()) || !strings.Contains(stderr, "address already in use") {
		t.Fatalf("exit %d, stderr %q: want 1 and a message naming the busy address", code, stderr)
	}
}

func TestProcessEnvironmentWithoutSupervisor(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	cfg := writeConfig(t, backendsYAML([]string{b.url}))
	cmd := exec.Command(relayBin, "-config", cfg)
	cmd.Env = append(os.Environ(), "RELAY_PROCESS"+"=0")
	var stderrBuf strings.Builder
	cmd.Stderr = &stderrBuf
	cmd.WaitDelay = exitTimeout
	err := cmd.Run()
	code, stderr := cmd.ProcessState.ExitCode(), stderrBuf.String()
	if err != nil && code == -1 {
		t.Fatal(err)
	}
	if code != 1 || !strings.Contains(stderr, "RELAY_PROCESS") || !strings.Contains(stderr, "not a listening socket") {
		t.Fatalf("exit %d, stderr %q: want 1 and a message naming %s", code, stderr, "RELAY_PROCESS")
	}
}

// TestProcessesDrainWhenTheSupervisorDies: the kernel sends each serving
// process SIGTERM when the supervisor is killed; a process must then
// finish its requests in flight, although writing its log now fails.
func TestProcessesDrainWhenTheSupervisorDies(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	r, _ := startRelay(t, "", "-config", writeConfig(t, "processes: 2\naccess_log: true\n"+backendsYAML([]string{b.url})))
	pids := childPIDs(t, r, 2)
	type answer struct {
		code int
		err  error
	}
	const n = 4
	answers := make(chan answer, n)
	for i := range n {
		go func() {
			// New connections, so both processes are likely to hold some.
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
			resp, err := c.Get(r.url("/?delay=700ms&n=" + strconv.Itoa(i)))
			if err != nil {
				answers <- answer{0, err}
				return
			}
			resp.Body.Close()
			answers <- answer{resp.StatusCode, nil}
		}()
	}
	time.Sleep(300 * time.Millisecond) // the requests are in flight
	r.cmd.Process.Kill()
	for range n {
		if a := <-answers; a.err != nil || a.code != 200 {
			t.Errorf("request in flight when the supervisor died: %d %v, want 200", a.code, a.err)
		}
	}
	deadline := time.Now().Add(exitTimeout)
	for _, pid := range pids {
		for !gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("serving process %d still runs after the supervisor died", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestProcessesCPUAffinity checks cpu_affinity over real processes: each
// serving process, every thread of it, is bound to a core of its own, and a
// connection whose handshake arrives on a core is served by that core's
// process.
func TestProcessesCPUAffinity(t *testing.T) {
	t.Parallel()
	cpus, err := supervisor.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		t.Skipf("needs 2 CPUs, this test may use %v", cpus)
	}
	bs := newBackends(t, 2)
	r, started := startRelay(t, "", "-config", writeConfig(t, "processes: 2\ncpu_affinity: true\n"+backendsYAML(urlsOf(bs))))
	if on, _ := started["cpu_affinity"].(bool); !on || started.Num("workers") != 1 {
		t.Fatalf("started line %v, want cpu_affinity true and workers 1", started)
	}
	pids := childPIDs(t, r, 2)
	for i, pid := range pids {
		want := strconv.Itoa(cpus[i])
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
			if err != nil {
				continue // the thread ended
			}
			if got := statusField(string(status), "Cpus_allowed_list"); got != want {
				t.Errorf("process %d, thread %s: Cpus_allowed_list %q, want %q", i, task.Name(), got, want)
			}
		}
	}
	if !supervisor.KernelAtLeast(6, 2) {
		t.Skip("the kernel picks SO_REUSEPORT sockets by SO_INCOMING_CPU since Linux 6.2")
	}
	_, port, _ := net.SplitHostPort(r.addr)
	for i, cpu := range cpus[:2] {
		const n = 8
		var conns []net.Conn
		bindErr, _ := supervisor.OnCPU(cpu, func() error { // the handshake is sent, and on loopback received, on cpu
			for k := range n {
				conns = append(conns, rawGet(t, r.addr, fmt.Sprintf("/cpu%d/%d", cpu, k)))
			}
			return nil
		})
		if bindErr != nil {
			t.Fatal(bindErr)
		}
		if got := clientConns(t, pids[i], port); got != n {
			t.Errorf("the process on CPU %d holds %d of the %d connections made from it", cpu, got, n)
		}
		for _, c := range conns {
			c.Close()
		}
		deadline := time.Now().Add(5 * time.Second)
		for clientConns(t, pids[i], port) != 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// statusField returns the value of a "Name:\tvalue" line of a
// /proc/PID/status file.
func statusField(status, name string) string {
	for line := range strings.SplitSeq(status, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestProcessesShareOneHealthView checks that with several processes the
// backends are checked once, by the supervisor, and that every process,
// including one restarted later, follows its results.
func TestProcessesShareOneHealthView(t *testing.T) {
	t.Parallel()
	var probes [2]atomic.Int64
	bs := make([]*backendServer, 2)
	for i := range bs {
		bs[i] = newBackend(t, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/health" {
					probes[i].Add(1)
				}
				h.ServeHTTP(w, r)
			})
		})
	}
	r, _ := startRelay(t, "", "-config", writeConfig(t, "processes: 2\n"+healthYAML+backendsYAML(urlsOf(bs))))
	pids := childPIDs(t, r, 2)

	// One checker: about one probe per interval, where a checker in each
	// process would make two.
	const span = 10 * checkInterval
	before := probes[1].Load()
	time.Sleep(span)
	if n := probes[1].Load() - before; n > 15 {
		t.Errorf("%d probes of one backend in %v with a %v interval: more than one checker", n, span, checkInterval)
	}

	sick := bs[0]
	sick.health.SetFailing(true)
	if _, ok := r.waitLog(checkFall*checkInterval+checkTimeout+slack, transition("backend down", sick.url)); !ok {
		t.Fatalf("no \"backend down\" line for %s", sick.url)
	}
	// Both processes keep it out of rotation: connections of their own
	// spread over both by the kernel's hash, each sending one request. The
	// supervisor logs the transition as it sends it, so the processes get
	// a moment to read it; then 16 requests in a row must avoid it.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	deadline := time.Now().Add(slack)
	for good, i := 0, 0; good < 16; i++ {
		if _, body := get(t, c, "http://"+r.addr+"/n"+strconv.Itoa(i)); body != bs[1].hello {
			if time.Now().After(deadline) {
				t.Fatalf("request %d answered %q %v after the transition, want only %q", i, body, slack, bs[1].hello)
			}
			good = 0
			continue
		}
		good++
	}
	var downs []logLine
	for _, l := range r.logs() {
		if transition("backend down", sick.url)(l) {
			downs = append(downs, l)
		}
	}
	if len(downs) != 1 || downs[0].Num("process") != -1 {
		t.Errorf("backend down lines %v, want one, from the supervisor", downs)
	}

	// A process started now begins from the current state.
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	again, ok := r.waitLog(startTimeout, func(l logLine) bool {
		return l.Msg() == "process started" && l.Num("process") == 0 && l.Num("pid") != pids[0]
	})
	if !ok {
		t.Fatalf("process 0 was not restarted\nstdout:\n%s", r.stdout.text())
	}
	if again.Num("healthy") != 1 {
		t.Errorf("restarted process line %v, want 1 healthy backend", again)
	}
	r.stop()
}

// TestRestartedProcessRunsTheSupervisorsConfiguration: a serving process
// started again after a crash runs the configuration the supervisor
// loaded, sent over its channel, not the file as it reads now, so the
// processes never disagree on what they serve.
func TestRestartedProcessRunsTheSupervisorsConfiguration(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 2)
	cfg := writeConfig(t, "processes: 2\n"+backendsYAML([]string{bs[0].url}))
	r, _ := startRelay(t, "", "-config", cfg)
	pids := childPIDs(t, r, 2)
	// The file now names the other backend only.
	if err := os.WriteFile(cfg, []byte("processes: 2\n"+backendsYAML([]string{bs[1].url})), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.waitLog(startTimeout, func(l logLine) bool {
		return l.Msg() == "process started" && l.Num("process") == 0 && l.Num("pid") != pids[0]
	}); !ok {
		t.Fatalf("process 0 was not restarted\nstdout:\n%s", r.stdout.text())
	}
	// New connections reach both processes (all 24 on one: 2^-23).
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	for i := range 24 {
		if code, body := get(t, c, r.url("/n"+strconv.Itoa(i))); code != 200 || body != bs[0].hello {
			t.Fatalf("request %d: %d %q, want 200 from the backend the supervisor loaded (%q)", i, code, body, bs[0].hello)
		}
	}
}

// TestProcessesShareBreakers: a backend whose breaker opens in one serving
// process is ejected by all of them: requests on connections spread over
// both processes avoid it from then on, and the opening is logged once,
// by the process where it happened. Its health checks pass throughout.
func TestProcessesShareBreakers(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	bad := newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/health" {
				h.ServeHTTP(w, r)
				return
			}
			hits.Add(1)
			w.WriteHeader(503)
		})
	})
	good := newBackend(t, nil)
	r, _ := startRelay(t, "", "-config", writeConfig(t, "processes: 2\nbreaker_failures: 2\n"+
		"breaker_statuses: [503]\nbreaker_open_time: 1m\n"+healthYAML+backendsYAML([]string{bad.url, good.url})))
	childPIDs(t, r, 2)

	// One keep-alive connection lands on one process: it alone sees the
	// failures and opens the breaker.
	c := newClient(t)
	for i := 0; hits.Load() < 2; i++ {
		if i > 20 {
			t.Fatalf("bad got %d requests in %d", hits.Load(), i)
		}
		get(t, c, r.url("/"))
	}
	opened, ok := r.waitLog(5*time.Second, func(l logLine) bool { return l.Msg() == "circuit breaker opened" })
	if !ok {
		t.Fatalf("no \"circuit breaker opened\" line\nstdout:\n%s", r.stdout.text())
	}
	// New connections spread over both processes by the kernel's hash;
	// none of 40 requests may reach bad once the message went round.
	time.Sleep(100 * time.Millisecond)
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	before := hits.Load()
	for i := range 40 {
		if code, body := get(t, fresh, r.url("/n"+strconv.Itoa(i))); code != 200 || body != good.hello {
			t.Fatalf("request %d: %d %q, want 200 from good", i, code, body)
		}
	}
	if n := hits.Load() - before; n != 0 {
		t.Errorf("bad got %d of 40 requests after its breaker opened in process %d", n, opened.Num("process"))
	}
	var lines int
	for _, l := range r.logs() {
		if l.Msg() == "circuit breaker opened" {
			lines++
		}
	}
	if lines != 1 {
		t.Errorf("%d \"circuit breaker opened\" lines, want 1", lines)
	}
	r.stop()
}

// A request cap holds for relay as a whole: with two processes and
// backend_max_requests: 2, a slow backend under 20 concurrent clients on
// fresh connections (spread over both processes by the kernel) never has
// more than 2 requests at once, and every request is answered.
func TestProcessesShareRequestCaps(t *testing.T) {
	t.Parallel()
	var now, most atomic.Int64
	slow := newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/health" {
				n := now.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(50 * time.Millisecond)
				now.Add(-1)
			}
			h.ServeHTTP(w, r)
		})
	})
	r, _ := startRelay(t, "", "-config", writeConfig(t, "processes: 2\nbackend_max_requests: 2\nqueue_timeout: 20s\n"+
		healthYAML+backendsYAML([]string{slow.url})))
	childPIDs(t, r, 2)

	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 20 {
		wg.Go(func() {
			for range 3 {
				resp, err := fresh.Get(r.url("/"))
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("at most %d requests at once at the backend", most.Load())
	if most.Load() > 2 {
		t.Errorf("the backend had %d requests at once; the cap is 2 for relay as a whole", most.Load())
	}
	if failed.Load() > 0 {
		t.Errorf("%d of 60 requests failed", failed.Load())
	}
	r.stop()
}
