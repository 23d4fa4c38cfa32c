package health

// The scale test measures what active checks cost relay at the size issue 3
// asks for: 1,000 backends, 500 on 127.0.0.1 ports and 500 on [::1] ports.
// It is skipped unless RELAY_HEALTH_SCALE=1, because it needs nginx and takes
// half a minute. The backends are one nginx process on 500 ports per address
// family, started from a generated config in a temporary directory and stopped
// by its PID, so nginx's CPU is not counted; relay's side is measured with
// getrusage over the whole test process.
//
//	RELAY_HEALTH_SCALE=1 go test -run TestScale -v -count=1 ./internal/health/
//
// Optional settings:
//
//	RELAY_HEALTH_SCALE_TYPE=tcp       probe type (default http); noop runs the
//	                                  loops with a probe that does nothing
//	RELAY_HEALTH_SCALE_SECONDS=30     measured span (default 20)
//	RELAY_HEALTH_SCALE_INTERVAL=500ms probe interval during the run (default 1s)
//	RELAY_HEALTH_SCALE_PORT=21000     first of the 500 ports (default 21000)
//	RELAY_HEALTH_SCALE_REUSE=0        a new connection per HTTP probe (default 1:
//	                                  kept connections, relay's default)
//
// By default the probes run every second, faster than the 5 s of the
// benchmark case, so the span holds enough of them; the cost per probe is
// then scaled to 1,000 backends every 5 s. RELAY_HEALTH_SCALE_INTERVAL=5s
// measures that case directly (set RELAY_HEALTH_SCALE_SECONDS=30 or more); on
// a shared 2-core machine both gave 70-90 µs per HTTP probe, 1.4-1.8% of one
// core, against 300-600 µs for the net/http probe started one loop at a time.
// Add -cpuprofile, or run perf record on the test process, to see where the
// time goes.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"relay/internal/backend"
)

const scalePerFamily = 500

func TestScale(t *testing.T) {
	if os.Getenv("RELAY_HEALTH_SCALE") != "1" {
		t.Skip("set RELAY_HEALTH_SCALE=1 to measure checks of 1,000 nginx backends")
	}
	typ := envOr("RELAY_HEALTH_SCALE_TYPE", TypeHTTP)
	span := envDuration(t, "RELAY_HEALTH_SCALE_SECONDS", 20*time.Second, time.Second)
	interval := envDuration(t, "RELAY_HEALTH_SCALE_INTERVAL", time.Second, 1)
	base, err := strconv.Atoi(envOr("RELAY_HEALTH_SCALE_PORT", "21000"))
	if err != nil {
		t.Fatalf("RELAY_HEALTH_SCALE_PORT: %v", err)
	}
	reuse, err := strconv.ParseBool(envOr("RELAY_HEALTH_SCALE_REUSE", "1"))
	if err != nil {
		t.Fatalf("RELAY_HEALTH_SCALE_REUSE: %v", err)
	}
	status := startNginx(t, base)

	var bs []*backend.Backend
	for _, host := range []string{"127.0.0.1", "[::1]"} {
		for i := range scalePerFamily {
			bs = append(bs, newBackend(t, fmt.Sprintf("http://%s:%d", host, base+i)))
		}
	}
	var opts []Option
	if typ == "noop" { // the loops alone: tickers, contexts, recording
		typ = TypeTCP
		opts = append(opts, WithProbe(func(context.Context, *backend.Backend) error { return nil }))
	}
	var tr transitions
	c, err := New(Config{Type: typ, Path: "/health", Interval: interval, Timeout: 2 * time.Second, Rise: 2, Fall: 3, ReuseConnection: reuse},
		bs, tr.onChange, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c.CheckAll(context.Background())
	for _, b := range bs {
		if !b.Healthy() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := c.targets[b.Name].probe(ctx)
			cancel()
			t.Fatalf("%s failed its first check; again now: %v", b, err)
		}
	}
	c.Run(context.Background())
	defer c.Stop()
	time.Sleep(interval + time.Second) // every loop past its start offset

	accepts0, requests0 := status()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	cpu0, start := cpuTime(t), time.Now()
	time.Sleep(span)
	cpu1, took := cpuTime(t), time.Since(start)
	runtime.ReadMemStats(&ms1)
	accepts1, requests1 := status()
	c.Stop()

	if got := tr.list(); len(got) != 0 {
		t.Errorf("backends changed state during the run: %v", got)
	}
	// Each status fetch is one connection and one request of its own.
	probes := accepts1 - accepts0 - 1
	if typ == TypeHTTP {
		probes = requests1 - requests0 - 1
	}
	want := float64(len(bs)) * took.Seconds() / interval.Seconds()
	if len(opts) > 0 {
		probes = int(want)
	}
	if float64(probes) < 0.9*want {
		t.Errorf("%d probes in %v, want about %.0f: the loops fell behind", probes, took, want)
	}
	cpu := cpu1 - cpu0
	perProbe := cpu / time.Duration(probes)
	const prodRate = 1000.0 / 5 // probes per second at 1,000 backends every 5 s
	share := perProbe.Seconds() * prodRate * 100
	t.Logf("%s probes (reuse_connection %v): %d in %v (%d connections), process CPU %v: %.1f µs per probe, %.0f allocs per probe, %d GCs",
		typ, reuse, probes, took.Round(time.Millisecond), accepts1-accepts0-1, cpu.Round(time.Millisecond),
		float64(perProbe.Nanoseconds())/1e3, float64(ms1.Mallocs-ms0.Mallocs)/float64(probes), ms1.NumGC-ms0.NumGC)
	t.Logf("at 1,000 backends every 5 s: %.2f%% of one core", share)
}

// cpuTime is the user plus system CPU time of the whole process so far.
func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startNginx runs one single-process nginx that answers GET /health with 200
// on ports base..base+499 of 127.0.0.1 and of [::1], and returns a function
// reading its accepted-connection and request counters. nginx is stopped by
// PID when the test ends. The ports should lie below Linux's ephemeral range
// (32768-60999 by default): the client ends of earlier runs' connections
// linger there in TIME_WAIT and would keep nginx from binding.
func startNginx(t *testing.T, base int) (status func() (accepts, requests int)) {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		for _, p := range []string{"/usr/sbin/nginx", "/usr/local/sbin/nginx"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
			}
		}
	}
	if err != nil {
		t.Skip("nginx is not installed")
	}
	dir := t.TempDir()
	var conf strings.Builder
	fmt.Fprintf(&conf, `daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  server {
`, dir)
	for i := range scalePerFamily {
		fmt.Fprintf(&conf, "    listen 127.0.0.1:%d;\n    listen [::1]:%d;\n", base+i, base+i)
	}
	conf.WriteString(`    location = /health { return 200 "ok\n"; }
    location = /status { stub_status; }
  }
}
`)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	statusAddr := fmt.Sprintf("[::1]:%d", base)
	deadline := time.Now().Add(10 * time.Second)
	for _, host := range []string{"127.0.0.1", "::1"} {
		for i := range scalePerFamily {
			addr := net.JoinHostPort(host, strconv.Itoa(base+i))
			for {
				c, err := net.Dial("tcp", addr)
				if err == nil {
					c.Close()
					break
				}
				select {
				case err := <-exited:
					log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
					t.Fatalf("nginx exited (%v):\n%s", err, log)
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("nginx does not listen on %s: %v", addr, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	return func() (int, int) { return nginxStatus(t, statusAddr) }
}

// nginxStatus reads the "accepts handled requests" counters of stub_status.
func nginxStatus(t *testing.T, addr string) (accepts, requests int) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /status HTTP/1.1\r\nHost: status\r\nConnection: close\r\n\r\n")
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "server accepts handled requests" && sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 3 {
				accepts, _ = strconv.Atoi(f[0])
				requests, _ = strconv.Atoi(f[2])
				return accepts, requests
			}
		}
	}
	t.Fatalf("no counters in nginx status from %s (%v)", addr, sc.Err())
	return 0, 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// envDuration reads a duration; a bare number counts in unit.
func envDuration(t *testing.T, key string, def, unit time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * unit
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return d
}
