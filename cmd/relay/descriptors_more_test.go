package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// More attacks on relay's descriptors under an open-file limit of
// fdLimit, each holding far more than the limit could carry: WebSocket
// tunnels the backend keeps open, connections that send nothing, and
// requests whose bodies never come. Each is refused past the budget
// (503, or a closed connection) while relay never meets EMFILE, its
// admin listener answers, no backend is blamed, and once the attack ends
// relay serves again.
func TestDescriptorFloodsAreRefusedNotFailed(t *testing.T) {
	const clients = 700 // each alone takes a place, most take two
	b := newBackend(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			switch req.URL.Path {
			case "/ws":
				c, brw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer c.Close()
				brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
				brw.Flush()
				// The session lasts until relay passes on the
				// client's end.
				c.SetDeadline(time.Now().Add(30 * time.Second))
				io.Copy(io.Discard, brw)
				return
			case "/upload":
				io.Copy(io.Discard, req.Body)
				return
			}
			next.ServeHTTP(w, req)
		})
	})
	attacks := []struct {
		name string
		open func(c net.Conn)
	}{
		{"WebSockets held open", func(c net.Conn) {
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		}},
		{"connections that send nothing", func(net.Conn) {}},
		{"request bodies that never come", func(c net.Conn) {
			io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 100000000\r\n\r\nx")
		}},
	}
	r, admin := startLimitedRelay(t, 1, b, "")
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			var mu sync.Mutex
			got := map[string]int{}
			var conns []net.Conn
			var wg sync.WaitGroup
			for range clients {
				c, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				c.SetDeadline(time.Now().Add(20 * time.Second))
				a.open(c)
				wg.Go(func() {
					line, err := bufio.NewReader(c).ReadString('\n')
					what := strings.TrimSpace(line)
					if err != nil && line == "" {
						what = "no answer"
					}
					mu.Lock()
					got[what]++
					mu.Unlock()
				})
			}
			// The ones relay refuses are answered at once; the rest
			// hold what they took.
			deadline := time.Now().Add(10 * time.Second)
			for {
				mu.Lock()
				refused := got["HTTP/1.1 503 Service Unavailable"]
				mu.Unlock()
				if refused > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			checkServes(t, r, admin)
			if n := fdsOf(t, r.cmd.Process.Pid); n >= fdLimit {
				t.Fatalf("relay holds %d descriptors under a limit of %d:%s", n, fdLimit, fdReport(processTree(r.cmd.Process.Pid)))
			}
			for _, c := range conns {
				c.Close()
			}
			wg.Wait()
			t.Logf("%d clients: %v", clients, got)
			if got["HTTP/1.1 503 Service Unavailable"] == 0 {
				t.Fatalf("answers %v; want some refused for want of descriptors", got)
			}
			servesAgain(t, r)
			checkNoShortage(t, r)
		})
	}
}

// HTTP/2 streams whose request bodies never come hold a backend
// connection each while they wait: past the budget relay refuses streams
// (REFUSED_STREAM) or answers 503, and never meets EMFILE.
func TestDescriptorsHTTP2BodiesThatNeverCome(t *testing.T) {
	b := newBackend(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			io.Copy(io.Discard, req.Body)
			next.ServeHTTP(w, req)
		})
	})
	r, admin := startLimitedRelay(t, 1, b, "")
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, h := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "a.example"}, {":path", "/upload"}, {"content-length", "100000000"}} {
		enc.WriteField(hpack.HeaderField{Name: h[0], Value: h[1]})
	}
	f := &flood{got: make(map[string]int), more: make(chan struct{}, 1)}
	t.Cleanup(f.close)
	for range attackConns {
		c, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		f.conns = append(f.conns, c)
		io.WriteString(c, http2.ClientPreface)
		fr := http2.NewFramer(c, c)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		fr.WriteSettings()
		for i := range attackStreams {
			id := uint32(2*i + 1)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true})
			fr.WriteData(id, false, []byte("x"))
		}
		f.wg.Add(1)
		go f.read(fr)
	}
	// Streams past the budget are refused at once; the others wait.
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		refused := f.got["REFUSED_STREAM"] + f.got["503"]
		f.mu.Unlock()
		if refused > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stream refused in 10s: %v", f.got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	checkServes(t, r, admin)
	if n := fdsOf(t, r.cmd.Process.Pid); n >= fdLimit {
		t.Fatalf("relay holds %d descriptors under a limit of %d:%s", n, fdLimit, fdReport(processTree(r.cmd.Process.Pid)))
	}
	f.close()
	servesAgain(t, r)
	f.mu.Lock()
	t.Logf("%d streams, frames that ended them: %v", attackConns*attackStreams, f.got)
	f.mu.Unlock()
	checkNoShortage(t, r)
}
