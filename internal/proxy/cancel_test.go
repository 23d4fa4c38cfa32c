//go:build linux

package proxy

import (
	"bufio"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// openFiles counts this process's open descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// hangingBackend reads one request per connection and never answers; it
// records when relay closes each connection.
type hangingBackend struct {
	ln     net.Listener
	mu     sync.Mutex
	opened int
	closed []time.Time
	wg     sync.WaitGroup
}

func newHangingBackend(t *testing.T) *hangingBackend {
	hb := &hangingBackend{ln: listen(t)}
	hb.wg.Go(func() {
		for {
			c, err := hb.ln.Accept()
			if err != nil {
				return
			}
			hb.mu.Lock()
			hb.opened++
			hb.mu.Unlock()
			hb.wg.Go(func() {
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						hb.mu.Lock()
						hb.closed = append(hb.closed, time.Now())
						hb.mu.Unlock()
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() { hb.ln.Close(); hb.wg.Wait() })
	return hb
}

func (hb *hangingBackend) counts() (opened int, closed []time.Time) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.opened, append([]time.Time(nil), hb.closed...)
}

// 200 clients that give up after 1 s on a request the backend would take
// 10 s over: the backend sees every upstream connection closed within 2 s
// of the aborts, nothing stays in flight, and relay's goroutines and open
// files return to where they started.
func TestClientsThatGiveUpCancelTheirUpstreamRequests(t *testing.T) {
	const clients = 200
	hb := newHangingBackend(t)
	cfg := withDefaults(Config{})
	cfg.Pool.ResponseTimeout = 10 * time.Second
	r := startRelayExactly(t, cfg, newBackendFor(t, hb.ln.Addr().String(), 1))
	files, goroutines := openFiles(t), runtime.NumGoroutine()

	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		write(t, c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	eventually(t, "every request reaching the backend", func() bool {
		opened, _ := hb.counts()
		return opened == clients
	})
	time.Sleep(time.Second)
	aborted := time.Now()
	for _, c := range conns {
		c.Close()
	}
	deadline := aborted.Add(2 * time.Second)
	for {
		_, closed := hb.counts()
		if len(closed) == clients {
			last := closed[len(closed)-1]
			t.Logf("the backend saw the last of %d connections closed %v after the aborts", clients, last.Sub(aborted).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after the aborts the backend saw %d of %d connections closed", len(closed), clients)
		}
		time.Sleep(10 * time.Millisecond)
	}
	expectNoneInFlight(t, r)
	eventually(t, "open files and goroutines back to their starting level", func() bool {
		return openFiles(t) <= files && runtime.NumGoroutine() <= goroutines
	})
}

// A client that pipelines a second request behind a slow one is not taken
// for gone while relay waits: both are answered in order.
func TestPipelinedRequestsSurviveTheWatchForGoneClients(t *testing.T) {
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		for {
			req, err := rb.next(br)
			if err != nil {
				return
			}
			if req.Target == "/slow" {
				time.Sleep(1200 * time.Millisecond) // past two watches
			}
			c.Write([]byte(okResponse(req.Target)))
		}
	})
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	for _, want := range []string{"/slow", "/next"} {
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != 200 || !strings.Contains(body, want) {
			t.Fatalf("got %d %q, want 200 with %q", resp.StatusCode, body, want)
		}
	}
}
