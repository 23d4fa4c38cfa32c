package main

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// backendProc is cmd/server running as a child process on a fixed
// loopback port, so it can be killed by its pid and started again on the
// same port.
type backendProc struct {
	bin, port string
	cmd       *exec.Cmd
	exited    chan struct{} // closed once cmd has been waited for
}

// startBackendProc starts cmd/server on port and waits until it answers;
// it is killed at cleanup.
func startBackendProc(t *testing.T, bin, port string) *backendProc {
	t.Helper()
	p := &backendProc{bin: bin, port: port}
	t.Cleanup(func() { p.kill(t) })
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *backendProc) url() string { return "http://127.0.0.1:" + p.port }

// start runs the process and polls /health until it answers 200.
func (p *backendProc) start() error {
	cmd := exec.Command(p.bin, "-addr", "127.0.0.1:"+p.port, "-quiet")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start cmd/server on %s: %v", p.port, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() { cmd.Wait(); close(exited) }()
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := c.Get(p.url() + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("cmd/server on port %s exited before answering: %s", p.port, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cmd/server on port %s did not answer within %v: %v", p.port, startTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL to the process by its pid and waits until it is reaped.
func (p *backendProc) kill(t *testing.T) {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(exitTimeout):
		t.Errorf("cmd/server pid %d did not exit after SIGKILL", p.cmd.Process.Pid)
	}
}

// buildServer builds cmd/server for a test that runs it as a process.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command("go", "build", "-o", bin, "../server").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/server: %v\n%s", err, out)
	}
	return bin
}

func TestKilledBackendCostsNoRequests(t *testing.T) {
	t.Parallel()
	killBackendUnderLoad(t, 1)
}

// With two serving processes, each has its own connection pools and retry
// budget, and breakers agree through the supervisor.
func TestKilledBackendCostsNoRequestsWithTwoProcesses(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("several serving processes need Linux")
	}
	t.Parallel()
	killBackendUnderLoad(t, 2)
}

// killBackendUnderLoad: 50 keep-alive clients send GET / for 20 s over
// three cmd/server processes; 5 s in one of them is killed with SIGKILL,
// and 10 s later it is started again on the same port. No request may
// fail (a transport error or any status but 200): the requests the dying
// backend held are retried elsewhere (the retry budget banks what the last
// second's requests earned, enough for all of them), its breaker and
// health check take it out. The health checks must log it down and up
// again, and it must answer requests again before the load ends.
func killBackendUnderLoad(t *testing.T, processes int) {
	bin := buildServer(t)
	servers := make([]*backendProc, 3)
	urls := make([]string, len(servers))
	for i := range servers {
		servers[i] = startBackendProc(t, bin, freePort(t))
		urls[i] = servers[i].url()
	}
	victim := servers[1]
	// breaker_open_time 2s instead of 30s: the restarted backend returns
	// once its checks pass and its breaker is past its open time, which
	// must happen within the 5 s the load runs after the restart.
	r, _ := startRelay(t, "", "-config", writeConfig(t, fmt.Sprintf("processes: %d\n", processes)+"access_log: false\nbreaker_open_time: 2s\n"+
		"health_check_interval: 500ms\nhealth_check_timeout: 250ms\nhealth_check_rise: 2\nhealth_check_fall: 2\n"+
		backendsYAML(urls)))

	const (
		clients  = 50
		duration = 20 * time.Second
		killAt   = 5 * time.Second
		downFor  = 10 * time.Second
	)
	var (
		total, failed atomic.Int64
		restarted     atomic.Bool
		mu            sync.Mutex
		perPort       = map[string]int{} // answers by backend port, whole run
		afterRestart  = map[string]int{} // answers by backend port once the victim is back
		failures      []string
		wg            sync.WaitGroup
	)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
			for time.Since(start) < duration {
				sent := time.Since(start)
				resp, err := c.Get(r.url("/"))
				var body []byte
				status := 0
				if err == nil {
					status = resp.StatusCode
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				back := restarted.Load()
				total.Add(1)
				mu.Lock()
				if err != nil || status != 200 {
					failed.Add(1)
					if len(failures) < 10 {
						failures = append(failures, fmt.Sprintf("sent %v in: status %d, error %v, body %q",
							sent.Round(time.Millisecond), status, err, body))
					}
				} else {
					port := strings.TrimSuffix(strings.TrimPrefix(string(body), "Hello World from "), " server\n")
					perPort[port]++
					if back {
						afterRestart[port]++
					}
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(killAt - time.Since(start))
	killedPID := victim.cmd.Process.Pid
	victim.kill(t)
	killed := time.Since(start)
	time.Sleep(killAt + downFor - time.Since(start))
	restartErr := victim.start()
	restarted.Store(true)
	back := time.Since(start)
	wg.Wait()
	elapsed := time.Since(start)
	if restartErr != nil {
		t.Fatalf("starting the killed backend again: %v", restartErr)
	}

	t.Logf("cmd/server on %s: pid %d killed %v in, pid %d answering again %v in",
		victim.port, killedPID, killed.Round(time.Millisecond), victim.cmd.Process.Pid, back.Round(time.Millisecond))
	for _, l := range r.logs() {
		if l.Str("backend") == victim.url() && (l.Msg() == "backend down" || l.Msg() == "backend up" ||
			strings.HasPrefix(l.Msg(), "circuit breaker")) {
			t.Logf("relay: %s %q (process %d)", l.Str("time"), l.Msg(), l.Num("process"))
		}
	}
	t.Logf("%d requests from %d clients in %v, %d failed; answers by port %v; after the restart %v",
		total.Load(), clients, elapsed.Round(time.Millisecond), failed.Load(), perPort, afterRestart)
	if failed.Load() > 0 {
		t.Errorf("%d of %d requests failed, want none; the first:\n%s", failed.Load(), total.Load(), strings.Join(failures, "\n"))
	}
	for _, s := range servers {
		if s != victim && afterRestart[s.port] == 0 {
			t.Errorf("backend %s answered nothing in the last %v", s.port, duration-killAt-downFor)
		}
	}
	if afterRestart[victim.port] == 0 {
		t.Errorf("the restarted backend %s answered none of the requests of the last %v", victim.port, duration-killAt-downFor)
	}
	if _, ok := r.waitLog(0, transition("backend down", victim.url())); !ok {
		t.Errorf("no \"backend down\" line for the killed backend %s", victim.url())
	}
	if _, ok := r.waitLog(0, transition("backend up", victim.url())); !ok {
		t.Errorf("no \"backend up\" line for the restarted backend %s", victim.url())
	}
	r.stop()
}
