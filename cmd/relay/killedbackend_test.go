//go:build linux

package main

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// demoServer is cmd/server running as a process of its own, so a test can
// kill it the way a crash or the OOM killer would.
type demoServer struct {
	bin, port string
	cmd       *exec.Cmd
}

func startDemoServer(t *testing.T, bin, port string) *demoServer {
	t.Helper()
	s := &demoServer{bin: bin, port: port}
	s.start(t)
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *demoServer) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(s.bin, "-addr", "127.0.0.1:"+s.port, "-quiet")
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := http.Get("http://127.0.0.1:" + s.port + "/health")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cmd/server on port %s did not answer: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL to the server's process and reaps it.
func (s *demoServer) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
	}
}

// Continuous GET load from 50 clients for 20 s over three backends, each a
// process of its own; one is killed with SIGKILL 5 s in and started again
// 10 s later. No client request fails: the requests the dying backend held
// are retried elsewhere (the retry budget banks what the last second's
// requests earned, enough for all of them), its breaker and health check
// take it out, and it takes traffic again once both allow.
func TestKilledBackendCostsNoRequests(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command("go", "build", "-o", bin, "../server").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/server: %v\n%s", err, out)
	}
	servers := make([]*demoServer, 3)
	urls := make([]string, 3)
	for i := range servers {
		servers[i] = startDemoServer(t, bin, freePort(t))
		urls[i] = "http://127.0.0.1:" + servers[i].port
	}
	// A breaker open for 3 s, not 30, so the restarted backend is back
	// before the load ends: it returns once its checks pass and the breaker
	// is past its open time.
	r, _ := startRelay(t, "", "-config", writeConfig(t, "access_log: false\nbreaker_open_time: 3s\n"+
		"health_check_interval: 500ms\nhealth_check_timeout: 250ms\nhealth_check_rise: 2\nhealth_check_fall: 2\n"+
		backendsYAML(urls)))

	const (
		clients  = 50
		duration = 20 * time.Second
		killAt   = 5 * time.Second
		downFor  = 10 * time.Second
	)
	victim := servers[1]
	var (
		total, failed atomic.Int64
		afterRestart  atomic.Int64 // answers from the victim once it is back
		restarted     atomic.Bool
		mu            sync.Mutex
		failures      []string
		wg            sync.WaitGroup
	)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			for time.Since(start) < duration {
				resp, err := c.Get(r.url("/"))
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				total.Add(1)
				switch {
				case err != nil || resp.StatusCode != 200:
					failed.Add(1)
					mu.Lock()
					if len(failures) < 10 {
						failures = append(failures, fmt.Sprintf("at %v: %v %s", time.Since(start).Round(time.Millisecond), err, body))
						if err == nil {
							failures[len(failures)-1] = fmt.Sprintf("at %v: %d %q", time.Since(start).Round(time.Millisecond), resp.StatusCode, body)
						}
					}
					mu.Unlock()
				case restarted.Load() && strings.Contains(string(body), victim.port):
					afterRestart.Add(1)
				}
			}
		})
	}
	time.Sleep(killAt)
	victim.kill()
	killed := time.Now()
	time.Sleep(downFor)
	victim.start(t)
	restarted.Store(true)
	t.Logf("backend on %s killed %v in, started again %v later", victim.port, killed.Sub(start).Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	wg.Wait()

	t.Logf("%d requests, %d failed; the restarted backend answered %d", total.Load(), failed.Load(), afterRestart.Load())
	if failed.Load() > 0 {
		t.Errorf("%d of %d requests failed, want none; the first:\n%s", failed.Load(), total.Load(), strings.Join(failures, "\n"))
	}
	if afterRestart.Load() == 0 {
		t.Errorf("the restarted backend took no traffic in the last %v", duration-killAt-downFor)
	}
	r.stop()
}
