package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The open-file limit the descriptor tests run relay under, and the
// attack on it: cleartext HTTP/2 connections that grant no flow-control
// window, each opening its hundred streams. Each stream that held its
// backend connection while it waited would hold a descriptor: 800 of
// them, far past the limit.
const (
	fdLimit       = 512
	attackConns   = 8
	attackStreams = 100
)

// A client that grants no window must not take relay's descriptors: a
// response relay has whole is held in memory and its backend connection
// goes back, so every stream is answered and relay's descriptors stay
// few; with several processes, in each of them.
//
// The connections that go back are kept idle for reuse, as many as the
// most streams that waited for a backend at once (a hundred a process
// here, which the budget reclaims when short): those are the pool's, not
// the streams'. The pool is held to idleKept a backend so that every
// connection to the backend past it is one a stream holds.
func TestWindowlessStreamsTakeNoDescriptors(t *testing.T) {
	const idleKept = 4
	forProcesses(t, func(t *testing.T, processes int) {
		b := newBackend(t, nil)
		port, _ := strconv.Atoi(b.port)
		r, admin := startLimitedRelay(t, processes, b, fmt.Sprintf("max_idle_conns_per_backend: %d\n", idleKept))
		// One connection's streams at a time, so that no more requests
		// wait for backends at once than the budget has places for.
		attack := windowlessFlood(t, r.addr, "/", true)
		statuses := attack.wait(t, attackConns*attackStreams)
		if statuses["200"] != attackConns*attackStreams {
			t.Fatalf("streams answered %v; want all %d answered 200", statuses, attackConns*attackStreams)
		}
		// Each serving process keeps idleKept; the control's health
		// probe may hold one more. A connection that goes back past the
		// pool's bound is closed; give one still closing a moment.
		pids := processTree(r.cmd.Process.Pid)
		kept := processes*idleKept + 1
		deadline := time.Now().Add(5 * time.Second)
		for connsTo(pids, port) > kept && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := connsTo(pids, port); n > kept {
			t.Fatalf("relay holds %d connections to its backend (%d kept idle at most) for %d streams waiting for window; their backend connections were not given back:%s",
				n, kept, attackConns*attackStreams, fdReport(pids))
		}
		t.Logf("%d connections to the backend after %d streams", connsTo(pids, port), attackConns*attackStreams)
		if n := fdsOf(t, r.cmd.Process.Pid); n > 200 {
			t.Fatalf("relay holds %d descriptors for %d streams waiting for window:%s", n, attackConns*attackStreams, fdReport(pids))
		}
		checkServes(t, r, admin)
		attack.close()
		checkNoShortage(t, r)
	})
}

// A client that grants no window for responses too long to hold takes
// descriptors while its streams wait, but only up to the budget under the
// open-file limit: past it relay refuses streams (REFUSED_STREAM) and
// requests (503) while its listeners and the admin listener keep working,
// it never meets EMFILE, and the backend is not blamed; once the attack
// ends it serves as before.
func TestDescriptorsRunningShortRefuseWorkNotListeners(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 256<<10)
	b := newBackend(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Path == "/big" {
				w.Header().Set("Content-Length", strconv.Itoa(len(big)))
				w.Write(big)
				return
			}
			next.ServeHTTP(w, req)
		})
	})
	forProcesses(t, func(t *testing.T, processes int) {
		r, admin := startLimitedRelay(t, processes, b, "")
		attack := windowlessFlood(t, r.addr, "/big", false)
		statuses := attack.wait(t, attackConns*attackStreams)
		if statuses["REFUSED_STREAM"]+statuses["503"]+statuses["connection refused"] == 0 {
			t.Fatalf("streams answered %v; want some refused for want of descriptors", statuses)
		}
		if statuses["502"] > 0 {
			t.Fatalf("streams answered %v: relay's shortage was taken for the backend's failure", statuses)
		}
		checkServes(t, r, admin)
		// A new client is answered, not left to the kernel's backlog.
		c, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		line, _ := io.ReadAll(io.LimitReader(c, 12))
		c.Close()
		if got := string(line); got != "HTTP/1.1 503" && got != "HTTP/1.1 200" {
			t.Fatalf("a new client during the attack got %q; want an answer", got)
		}
		attack.close()
		servesAgain(t, r)
		checkNoShortage(t, r)
	})
}

// startLimitedRelay starts relay under an open-file limit of fdLimit,
// with h2c and max_connections far above what the limit can hold (as the
// configuration check allows) and the keys of extra, and returns it and
// its admin URL.
func startLimitedRelay(t *testing.T, processes int, b *backendServer, extra string) (*relay, string) {
	t.Helper()
	file := writeConfig(t, fmt.Sprintf("h2c: true\nmax_connections: 1000\nprocesses: %d\n", processes)+
		extra+backendsYAML([]string{b.url}))
	r, started := startRelayUnder(t, "", []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", fdLimit, fdLimit)}, "-config", file)
	return r, "http://" + started.Str("admin")
}

// checkServes checks that the admin listener answers while the attack
// holds its streams open.
func checkServes(t *testing.T, r *relay, admin string) {
	t.Helper()
	code, _ := get(t, newClient(t), admin+"/healthz")
	if code != 200 {
		t.Fatalf("the admin listener answered %d during the attack", code)
	}
}

// servesAgain waits up to 10 s for relay to answer a new client 200
// once an attack has ended.
func servesAgain(t *testing.T, r *relay) {
	t.Helper()
	client := newClient(t)
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Until relay has its descriptors back it answers a new
		// connection 503 right after the accept, before the request is
		// read; a client whose request crosses that answer sees a broken
		// connection. Either is "not yet".
		what := "a broken connection"
		resp, err := client.Get("http://" + r.addr + "/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
			what = resp.Status
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the attack relay still answers with %s (%v)", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkNoShortage checks that relay never met EMFILE and blamed no
// backend for its own shortage.
func checkNoShortage(t *testing.T, r *relay) {
	t.Helper()
	out := r.stdout.text() + r.stderr.text()
	for _, bad := range []string{"too many open files", "accept failed", "circuit breaker opened", "backend down"} {
		if strings.Contains(out, bad) {
			t.Fatalf("relay logged %q:\n%s", bad, out)
		}
	}
}

// fdsOf counts the descriptors pid and its children hold open.
func fdsOf(t *testing.T, pid int) int {
	t.Helper()
	pids := processTree(pid)
	total := 0
	for _, p := range pids {
		es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
		if err == nil {
			total += len(es)
		}
	}
	return total
}

// flood is a set of raw HTTP/2 connections whose streams wait for window,
// and what arrived on them: each stream's status, or its RST_STREAM code.
type flood struct {
	conns []net.Conn
	mu    sync.Mutex
	got   map[string]int
	n     int
	more  chan struct{}
	wg    sync.WaitGroup
}

// windowlessFlood opens attackConns cleartext HTTP/2 connections to addr
// with SETTINGS_INITIAL_WINDOW_SIZE 0 and attackStreams GETs of path on
// each; in waves, each connection's streams are answered before the next
// connection opens.
func windowlessFlood(t *testing.T, addr, path string, waves bool) *flood {
	t.Helper()
	f := &flood{got: make(map[string]int), more: make(chan struct{}, 1)}
	t.Cleanup(f.close)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, h := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "a.example"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
	}
	for range attackConns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		f.conns = append(f.conns, c)
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
		for i := range attackStreams {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block.Bytes(), EndStream: true, EndHeaders: true})
		}
		f.wg.Add(1)
		go f.read(fr)
		if waves {
			f.wait(t, len(f.conns)*attackStreams)
		}
	}
	return f
}

// read records what arrives on one connection until it ends; streams
// left unanswered when relay closes it count as "connection refused".
func (f *flood) read(fr *http2.Framer) {
	defer f.wg.Done()
	answered := 0
	for {
		fm, err := fr.ReadFrame()
		if err != nil {
			f.note("connection refused", attackStreams-answered)
			return
		}
		var what string
		switch fm := fm.(type) {
		case *http2.MetaHeadersFrame:
			what = fm.PseudoValue("status")
		case *http2.RSTStreamFrame:
			what = fm.ErrCode.String()
		case *http2.SettingsFrame:
			if !fm.IsAck() {
				fr.WriteSettingsAck()
			}
			continue
		default:
			continue
		}
		answered++
		f.note(what, 1)
	}
}

// note records n streams answered with what.
func (f *flood) note(what string, n int) {
	if n <= 0 {
		return
	}
	f.mu.Lock()
	f.got[what] += n
	f.n += n
	f.mu.Unlock()
	select {
	case f.more <- struct{}{}:
	default:
	}
}

// wait waits up to 20 s for n streams' answers and returns them counted
// by status or reset code.
func (f *flood) wait(t *testing.T, n int) map[string]int {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		f.mu.Lock()
		done, got := f.n >= n, maps.Clone(f.got)
		f.mu.Unlock()
		if done {
			return got
		}
		select {
		case <-f.more:
		case <-deadline:
			f.mu.Lock()
			defer f.mu.Unlock()
			t.Fatalf("%d of %d streams answered in 20s: %v", f.n, n, f.got)
		}
	}
}

// close ends the attack's connections.
func (f *flood) close() {
	for _, c := range f.conns {
		c.Close()
	}
	f.wg.Wait()
}
