package handler

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/core"
	"relay/internal/testaddr"
)

const ioTimeout = 10 * time.Second

// newBackend starts an HTTP backend named name and returns it as a relay
// backend.
func newBackend(t *testing.T, name string, h http.HandlerFunc) *backend.Backend {
	t.Helper()
	if h == nil {
		h = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Backend", name)
			fmt.Fprintf(w, "%s %s %s xff=%s proto=%s secret=%q", name, r.Method, r.URL.RequestURI(),
				r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Secret"))
		}
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return backendAt(t, s.URL)
}

func backendAt(t *testing.T, raw string) *backend.Backend {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.New(u, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deadBackend is a backend whose address refuses connections.
func deadBackend(t *testing.T) *backend.Backend {
	t.Helper()
	return backendAt(t, "http://"+testaddr.Refused(t))
}

// startFront serves a Handler over a core whose default pool holds bs, on
// a real loopback socket, speaking HTTP/1.1 and HTTP/2 without TLS (h2c),
// and returns its URL.
func startFront(t *testing.T, bs ...*backend.Backend) string {
	t.Helper()
	return startFrontTimed(t, core.BodyTime{Idle: ioTimeout}, bs...)
}

// startFrontTimed is startFront with bt as the clients' time to send a
// request body.
func startFrontTimed(t *testing.T, bt core.BodyTime, bs ...*backend.Backend) string {
	t.Helper()
	d := config.Default()
	c := core.New(core.Config{})
	if _, err := c.AddPool(core.PoolConfig{
		Name: "default", Algorithm: "round-robin", Retries: d.Retries,
		ConnectTimeout: d.ConnectTimeout, ResponseTimeout: d.ResponseTimeout,
		MaxIdlePerBackend: d.MaxIdleConnsPerBackend, IdleTimeout: d.UpstreamIdleTimeout,
	}, bs); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: New(c, bt), Protocols: new(http.Protocols), ReadHeaderTimeout: ioTimeout}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		srv.Shutdown(ctx)
		c.CloseIdle()
	})
	return "http://" + ln.Addr().String()
}

// clients are Go's HTTP client over HTTP/1.1 and over HTTP/2 without TLS.
func clients(t *testing.T) map[string]*http.Client {
	h1 := &http.Transport{Protocols: new(http.Protocols)}
	h1.Protocols.SetHTTP1(true)
	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h2.CloseIdleConnections)
	return map[string]*http.Client{
		"HTTP/1.1": {Transport: h1, Timeout: ioTimeout},
		"HTTP/2.0": {Transport: h2, Timeout: ioTimeout},
	}
}

func TestForwardsOverBothProtocols(t *testing.T) {
	front := startFront(t, newBackend(t, "a", nil), newBackend(t, "b", nil))
	for proto, cl := range clients(t) {
		t.Run(proto, func(t *testing.T) {
			seen := map[string]int{}
			for i := 0; i < 4; i++ {
				req, _ := http.NewRequest("GET", front+"/path?q=1", nil)
				req.Header.Set("X-Forwarded-For", "203.0.113.7") // forged: replaced
				resp, err := cl.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.Proto != proto {
					t.Fatalf("spoke %s, want %s", resp.Proto, proto)
				}
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				want := " GET /path?q=1 xff=127.0.0.1 proto=http secret=\"\""
				if got := string(body); !strings.HasSuffix(got, want) {
					t.Fatalf("backend saw %q, want it to end in %q", got, want)
				}
				seen[resp.Header.Get("X-Backend")]++
			}
			if seen["a"] != 2 || seen["b"] != 2 {
				t.Fatalf("round robin over a and b gave %v, want 2 each", seen)
			}
		})
	}
}

// TestPassesResponseFieldsWhole checks the response head the client gets:
// repeated fields keep every value in order, a name the backend wrote in
// lower case is found under its canonical form, and the length is the
// body's.
func TestPassesResponseFieldsWhole(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Set-Cookie", "a=1")
		h.Add("Set-Cookie", "b=2")
		h["x-lower"] = []string{"v"}
		h.Set("Content-Type", "text/x-relay")
		h.Add("X-Many", "1")
		h.Add("X-Many", "2")
		h.Add("X-Many", "3")
		io.WriteString(w, "twelve bytes")
	})
	front := startFront(t, b)
	for proto, cl := range clients(t) {
		t.Run(proto, func(t *testing.T) {
			resp, err := cl.Get(front + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) != "twelve bytes" || resp.ContentLength != 12 {
				t.Errorf("body %q with length %d, want %q with 12", body, resp.ContentLength, "twelve bytes")
			}
			for name, want := range map[string]string{
				"Set-Cookie": "a=1,b=2", "X-Lower": "v", "Content-Type": "text/x-relay", "X-Many": "1,2,3",
			} {
				if got := strings.Join(resp.Header.Values(name), ","); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestStripsHopByHopFields(t *testing.T) {
	front := startFront(t, newBackend(t, "a", nil))
	req, _ := http.NewRequest("GET", front+"/", nil)
	req.Header.Set("Connection", "X-Secret")
	req.Header.Set("X-Secret", "only for the first hop")
	resp, err := clients(t)["HTTP/1.1"].Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasSuffix(string(body), `secret=""`) {
		t.Fatalf("a field named in Connection reached the backend: %q", body)
	}
}

// TestStreamsRequestBodyOfUnknownLength sends a body whose length nobody
// knows in advance: it goes upstream chunked and arrives whole.
func TestStreamsRequestBodyOfUnknownLength(t *testing.T) {
	var got atomic.Int64
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Store(n)
		fmt.Fprintf(w, "%d %v", n, r.TransferEncoding)
	})
	front := startFront(t, b)
	const size = 1 << 20
	for proto, cl := range clients(t) {
		t.Run(proto, func(t *testing.T) {
			pr, pw := io.Pipe()
			go func() {
				chunk := strings.Repeat("x", 1000)
				for sent := 0; sent < size; sent += len(chunk) {
					io.WriteString(pw, chunk[:min(len(chunk), size-sent)])
				}
				pw.Close()
			}()
			req, _ := http.NewRequest("POST", front+"/upload", pr)
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != fmt.Sprintf("%d [chunked]", size) {
				t.Fatalf("status %d, backend said %q; want %d bytes, chunked", resp.StatusCode, body, size)
			}
		})
	}
}

// TestRetriesAnotherBackendAndAnswersErrors checks the core's retry and
// error answers through this door: a dead backend is skipped, and with
// every backend out the client gets relay's 503 at once.
func TestRetriesAnotherBackendAndAnswersErrors(t *testing.T) {
	good := newBackend(t, "good", nil)
	dead := deadBackend(t)
	front := startFront(t, dead, good)
	cl := clients(t)["HTTP/2.0"]
	for i := 0; i < 4; i++ {
		resp, err := cl.Get(front + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "good" {
			t.Fatalf("request %d: status %d from %q, want 200 from good", i, resp.StatusCode, resp.Header.Get("X-Backend"))
		}
	}
	good.SetDisabled(true)
	dead.SetDisabled(true)
	resp, err := cl.Get(front + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(body) != "Service Unavailable: no backend available\n" || resp.Header.Get("Retry-After") != core.RetryAfter {
		t.Fatalf("with no backend available: %d %q, want relay's 503", resp.StatusCode, body)
	}
}

// TestStreamsResponse checks that response bytes reach the client as the
// backend sends them, not when the response ends.
func TestStreamsResponse(t *testing.T) {
	release := make(chan struct{})
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(ioTimeout):
		}
		io.WriteString(w, "second\n")
	})
	front := startFront(t, b)
	for proto, cl := range clients(t) {
		t.Run(proto, func(t *testing.T) {
			resp, err := cl.Get(front + "/stream")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			line, err := br.ReadString('\n')
			if err != nil || line != "first\n" {
				t.Fatalf("first line %q, %v", line, err)
			}
			release <- struct{}{}
			if line, err = br.ReadString('\n'); err != nil || line != "second\n" {
				t.Fatalf("second line %q, %v", line, err)
			}
		})
	}
}

// TestCutsOffABrokenResponse: a backend that dies mid-body must not give
// the client a response that looks complete.
func TestCutsOffABrokenResponse(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, "only part of it")
		w.(http.Flusher).Flush()
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	})
	front := startFront(t, b)
	for proto, cl := range clients(t) {
		t.Run(proto, func(t *testing.T) {
			resp, err := cl.Get(front + "/")
			if err != nil {
				return // cut off before the head: also not a complete response
			}
			defer resp.Body.Close()
			if _, err := io.ReadAll(resp.Body); err == nil {
				t.Fatal("the client read a complete response from a backend that died mid-body")
			}
		})
	}
}

// TestTunnelsAnUpgrade runs a protocol switch through the door over
// HTTP/1.1: after the backend's 101 bytes flow both ways.
func TestTunnelsAnUpgrade(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		io.Copy(c, br) // echo
	}()
	front := startFront(t, backendAt(t, "http://"+ln.Addr().String()))
	c, err := net.Dial("tcp", strings.TrimPrefix(front, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "echo" {
		t.Fatalf("upgrade answer %v, %v", resp, err)
	}
	io.WriteString(c, "hello")
	buf := make([]byte, 5)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo through the tunnel: %q, %v", buf, err)
	}
}

// A client that cancels its request (closes the connection over HTTP/1.1,
// resets the stream over HTTP/2) cancels the upstream request: the backend
// sees its connection closed within a second, long before relay's response
// timeout.
func TestCancelledRequestCancelsUpstream(t *testing.T) {
	for proto, cl := range clients(t) {
		t.Run(proto, func(t *testing.T) {
			cancelled := make(chan time.Time, 1)
			b := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-r.Context().Done():
					cancelled <- time.Now()
				case <-time.After(10 * time.Second):
				}
			})
			front := startFront(t, b)
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, "GET", front+"/", nil)
			go func() {
				time.Sleep(300 * time.Millisecond)
				cancel()
			}()
			if resp, err := cl.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("the cancelled request got %d", resp.StatusCode)
			}
			gaveUp := time.Now()
			select {
			case at := <-cancelled:
				if d := at.Sub(gaveUp); d > time.Second {
					t.Errorf("the backend saw the cancel %v after the client, want within 1 s", d)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the backend never saw the upstream request cancelled")
			}
		})
	}
}
