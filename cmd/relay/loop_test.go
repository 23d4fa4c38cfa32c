package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tcpForwarder relays every connection it accepts to target, byte for
// byte: a proxy that knows nothing of HTTP, which no check of relay's
// addresses can see through.
func tcpForwarder(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil {
			c.Close()
			return false
		}
		conns[c] = true
		return true
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil || !track(c) {
				return
			}
			wg.Go(func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil || !track(up) {
					return
				}
				defer up.Close()
				go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
				io.Copy(c, up)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// openFilesOf counts the descriptors process pid holds.
func openFilesOf(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc/%d/fd: %v", pid, err)
	}
	return len(ents)
}

// TestLoopThroughAForwarderIsAnswered508: relay's backend is a TCP
// forwarder back to relay's own listener. Every request, over HTTP/1.1
// and over HTTP/2 (h2c), comes back once carrying relay's Via entry and
// is answered 508 at once, in whichever process it lands: the
// descriptors relay holds stay bounded and later clients are served.
func TestLoopThroughAForwarderIsAnswered508(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		port := freePort(t)
		fwd := tcpForwarder(t, "127.0.0.1:"+port)
		cfg := writeFile(t, t.TempDir(), "relay.yml", "listen: 127.0.0.1:"+port+"\nh2c: true\naccess_log: false\n"+
			"processes: "+strconv.Itoa(processes)+"\nresponse_timeout: 5s\nhealth_check_type: tcp\n"+
			backendsYAML([]string{"http://" + fwd}))
		r, _ := startRelay(t, "", "-config", cfg)
		pids := []int{r.cmd.Process.Pid}
		if processes > 1 {
			pids = childPIDs(t, r, processes)
		}
		files := func() int {
			n := 0
			for _, pid := range pids {
				n += openFilesOf(t, pid)
			}
			return n
		}

		h1 := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
		var protos http.Protocols
		protos.SetUnencryptedHTTP2(true)
		h2 := &http.Client{Transport: &http.Transport{Protocols: &protos}, Timeout: 10 * time.Second}
		t.Cleanup(func() {
			h1.Transport.(*http.Transport).CloseIdleConnections()
			h2.Transport.(*http.Transport).CloseIdleConnections()
		})
		send := func(c *http.Client, proto string, n int) {
			t.Helper()
			for i := range n {
				start := time.Now()
				resp, err := c.Get(r.url("/loop/" + strconv.Itoa(i)))
				if err != nil {
					t.Fatalf("%s request %d: %v", proto, i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				took := time.Since(start)
				if resp.Proto != proto || resp.StatusCode != 508 || !strings.HasPrefix(string(body), "Loop Detected: ") || took > 2*time.Second {
					t.Fatalf("%s request %d: %s %d %q after %v; want %s 508 Loop Detected at once", proto, i, resp.Proto, resp.StatusCode, body, took, proto)
				}
			}
		}
		// One request each first: connections to the forwarder and back
		// are then open and pooled.
		send(h1, "HTTP/1.1", 1)
		send(h2, "HTTP/2.0", 1)
		before := files()
		send(h1, "HTTP/1.1", 20)
		send(h2, "HTTP/2.0", 20)
		// Requests in turn reuse what the first ones opened; a process
		// that had not yet seen a looped request opens a chain of its own.
		after := files()
		if after > before+4*processes {
			t.Errorf("40 requests took relay's descriptors from %d to %d", before, after)
		}
		t.Logf("relay's descriptors: %d before 40 looped requests, %d after", before, after)
		// The loop is logged, not once per request: at most once every
		// 10 s by each process.
		isLoop := func(l logLine) bool { return strings.HasPrefix(l.Msg(), "request loop:") }
		if l, ok := r.waitLog(5*time.Second, isLoop); !ok {
			t.Error("relay did not log the loop")
		} else {
			t.Logf("relay logged: %v", l)
		}
		lines := 0
		for _, l := range r.logs() {
			if isLoop(l) {
				lines++
			}
		}
		if lines > processes {
			t.Errorf("%d log lines about the loop, want at most %d", lines, processes)
		}
		r.stop()
	})
}

// TestProcessesShareTheInstanceID: every serving process of one relay
// puts the same Via entry on what it forwards, before and after a
// reload, so a request that leaves through one process and comes back
// to another is known as relay's own.
func TestProcessesShareTheInstanceID(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	vias := map[string]int{}
	b := newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/health" {
				mu.Lock()
				vias[strings.Join(r.Header.Values("Via"), "|")]++
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	})
	file := writeConfig(t, "processes: 2\naccess_log: false\n"+backendsYAML([]string{b.url}))
	r, _ := startRelay(t, "", "-config", file)
	pids := childPIDs(t, r, 2)
	_, port, _ := net.SplitHostPort(r.addr)
	// 32 connections leave one process without any with probability
	// 2^-31.
	spread := func(from int) {
		t.Helper()
		for i := range 32 {
			c := rawGet(t, r.addr, "/conn"+strconv.Itoa(from+i))
			defer c.Close()
		}
		if a, b := clientConns(t, pids[0], port), clientConns(t, pids[1], port); a == 0 || b == 0 {
			t.Fatalf("processes hold %d and %d of the connections, want some each", a, b)
		}
	}
	spread(0)
	r.signal(syscall.SIGHUP)
	if _, ok := r.waitLog(10*time.Second, func(l logLine) bool { return l.Msg() == "configuration reloaded" }); !ok {
		t.Fatal("relay did not reload")
	}
	spread(100)
	mu.Lock()
	defer mu.Unlock()
	if len(vias) != 1 {
		t.Fatalf("the backend got Via %v; want one entry from both processes", vias)
	}
	for v, n := range vias {
		if !regexp.MustCompile(`^1\.1 relay-[0-9a-f]{16}$`).MatchString(v) || n != 64 {
			t.Errorf("the backend got Via %q %d times; want \"1.1 relay-ID\" 64 times", v, n)
		}
	}
}
