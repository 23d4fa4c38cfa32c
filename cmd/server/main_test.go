package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestResolveAddr(t *testing.T) {
	tests := []struct {
		name, addr, port, want string
		wantErr                bool
	}{
		{name: "port", port: "8001", want: ":8001"},
		{name: "port zero picks a free one", port: "0", want: ":0"},
		{name: "addr wins over port", addr: "127.0.0.1:7000", port: "8001", want: "127.0.0.1:7000"},
		{name: "ipv6 addr", addr: "[::1]:7000", want: "[::1]:7000"},
		{name: "port not a number", port: "http", wantErr: true},
		{name: "port too large", port: "65536", wantErr: true},
		{name: "addr without port", addr: "127.0.0.1", port: "8001", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolveAddr(tt.addr, tt.port)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("resolveAddr(%q, %q) = %q, %v; want %q, error %v", tt.addr, tt.port, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// lines is a concurrency-safe log sink that tells waiters about each write.
type lines struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newLines() *lines { return &lines{wrote: make(chan struct{}, 100)} }

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return l.buf.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor waits until the log holds s.
func (l *lines) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for !strings.Contains(l.String(), s) {
		select {
		case <-l.wrote:
		case <-deadline:
			t.Fatalf("log never said %q; it holds:\n%s", s, l.String())
		}
	}
}

type running struct {
	addr   string
	log    *lines
	exit   chan int
	cancel context.CancelFunc
}

// start runs the program with args and env until the test ends.
func start(t *testing.T, env map[string]string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{log: newLines(), exit: make(chan int, 1), cancel: cancel}
	ready := make(chan string, 1)
	go func() {
		r.exit <- run(ctx, args, func(k string) string { return env[k] }, r.log, func(a string) { ready <- a })
	}()
	select {
	case r.addr = <-ready:
	case code := <-r.exit:
		t.Fatalf("server exited with %d before listening:\n%s", code, r.log)
	case <-time.After(5 * time.Second):
		t.Fatal("server did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.exit:
		case <-time.After(15 * time.Second):
			t.Error("server did not stop")
		}
	})
	return r
}

func (r *running) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestServes(t *testing.T) {
	// PORT is not a port, so starting at all shows the flags win over it.
	r := start(t, map[string]string{"PORT": "nonsense"}, "-addr", "127.0.0.1:0")
	_, port, _ := strings.Cut(r.addr, ":")
	if code, body := r.get(t, "/"); code != 200 || body != fmt.Sprintf("Hello World from %s server\n", port) {
		t.Errorf("GET / = %d %q", code, body)
	}
	if code, body := r.get(t, "/health"); code != 200 || body != "ok\n" {
		t.Errorf("GET /health = %d %q", code, body)
	}
	if !strings.Contains(r.log.String(), "listening on 127.0.0.1:"+port) {
		t.Errorf("start line missing from the log:\n%s", r.log)
	}
}

func TestPortFromEnv(t *testing.T) {
	// An address in use makes the program fail, proving PORT was used.
	busy := start(t, nil, "-addr", "127.0.0.1:0", "-quiet")
	_, port, _ := strings.Cut(busy.addr, ":")
	var out bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Should it start after all, ready stops it again rather than hang.
	code := run(ctx, nil, func(k string) string { return map[string]string{"PORT": port}[k] }, &out,
		func(string) { cancel() })
	if code != 1 || !strings.Contains(out.String(), "address already in use") {
		t.Errorf("with PORT=%s taken: exit %d, output %q; want 1 and address already in use", port, code, out.String())
	}
}

// TestSignals toggles health with SIGUSR1 and stops with SIGTERM while a
// slow request is in flight, which must still be answered.
func TestSignals(t *testing.T) {
	r := start(t, nil, "-addr", "127.0.0.1:0")
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	r.log.waitFor(t, "/health now answers 503")
	if code, _ := r.get(t, "/health"); code != 503 {
		t.Errorf("after SIGUSR1 /health = %d, want 503", code)
	}
	syscall.Kill(syscall.Getpid(), syscall.SIGUSR1)
	r.log.waitFor(t, "/health now answers 200")
	if code, _ := r.get(t, "/health"); code != 200 {
		t.Errorf("after a second SIGUSR1 /health = %d, want 200", code)
	}

	// Once the slow request is written on a new connection, Shutdown must
	// serve it: it closes only idle connections and new ones that sent
	// nothing for 5 seconds. (A kept-alive connection is idle until the
	// server reads the next request, so the request must not reuse one.)
	slow := make(chan string, 1)
	written := make(chan struct{})
	go func() {
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { close(written) }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace),
			http.MethodGet, "http://"+r.addr+"/?delay=500ms", nil)
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := client.Do(req)
		if err != nil {
			slow <- err.Error()
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		slow <- fmt.Sprintf("%d %s", resp.StatusCode, body)
	}()
	select {
	case <-written:
	case got := <-slow:
		t.Fatalf("slow request failed: %s", got)
	}
	// Written is not yet accepted: connections still in the listen queue die
	// with the listener. The queue is first in, first out, so once a later
	// connection is answered, the slow one has been taken in.
	later := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := later.Get("http://" + r.addr + "/health"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
	if code := r.exitCode(t, "SIGTERM"); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0:\n%s", code, r.log)
	}
	if got := <-slow; !strings.HasPrefix(got, "200 Hello World") {
		t.Errorf("request in flight during SIGTERM got %q, want 200 and the hello line", got)
	}
}

// exitCode waits for r's run to return after how (a signal, a cancelled
// context) and gives its exit code, keeping it for the cleanup.
func (r *running) exitCode(t *testing.T, how string) int {
	t.Helper()
	select {
	case code := <-r.exit:
		r.exit <- code // for the cleanup
		return code
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not stop the server", how)
		return 0
	}
}

func TestQuietAndHelp(t *testing.T) {
	r := start(t, nil, "-addr", "127.0.0.1:0", "-quiet")
	r.get(t, "/")
	r.cancel()
	if code := <-r.exit; code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	r.exit <- 0
	if s := r.log.String(); s != "" {
		t.Errorf("-quiet still logged %q", s)
	}

	var out bytes.Buffer
	if code := run(context.Background(), []string{"-help"}, func(string) string { return "" }, &out, nil); code != 0 {
		t.Errorf("-help exit %d, want 0", code)
	}
	for _, want := range []string{"-port", "-addr", "-quiet", "/health", "/echo", "/download?size=N", "chunked=1",
		"/upload", "/admin/health/fail", "/admin/health/ok", "delay=", "status=", "SIGUSR1", "SIGTERM",
		"-register", "-register-prefix", "-register-key", "-register-ttl", "-advertise", "-weight", "-pool"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-help does not mention %q", want)
		}
	}

	for _, args := range [][]string{{"-nope"}, {"-port", "x"}, {"extra"}} {
		out.Reset()
		if code := run(context.Background(), args, func(string) string { return "" }, &out, nil); code != 2 {
			t.Errorf("%q: exit %d, want 2 (%s)", args, code, out.String())
		}
	}
}
