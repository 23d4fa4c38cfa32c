package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// bodilessBackend answers by path: responses that carry no body whatever
// their fields say, and an ordinary one naming the path for the rest.
func bodilessBackend(t *testing.T) *rawBackend {
	return newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		for {
			req, err := rb.next(br)
			if err != nil {
				return
			}
			var resp string
			switch req.Target {
			case "/head":
				resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
			case "/204":
				resp = "HTTP/1.1 204 No Content\r\nX-Kind: empty\r\n\r\n"
			case "/304":
				resp = "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nEtag: \"v1\"\r\n\r\n"
			default:
				resp = okResponse(req.Method + " " + req.Target)
			}
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	})
}

// TestPipelinedRequestsAnsweredInOrder writes several requests in one go,
// among them responses without bodies: if relay waited for or sent a body
// that is not there, the responses after it would come out wrong.
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	rb := bodilessBackend(t)
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"+
		"HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /204 HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"+
		"GET /304 HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"v1\"\r\n\r\n"+
		"GET /3 HTTP/1.1\r\nHost: x\r\n\r\n")
	tests := []struct {
		name, method string
		status       int
		body         string
		check        func(t *testing.T, h map[string][]string)
	}{
		{name: "first", method: "GET", status: 200, body: "GET /1"},
		{name: "HEAD keeps Content-Length", method: "HEAD", status: 200, check: func(t *testing.T, h map[string][]string) {
			if v := h["Content-Length"]; len(v) != 1 || v[0] != "5" {
				t.Errorf("Content-Length %q, want 5", v)
			}
		}},
		{name: "204", method: "GET", status: 204, check: func(t *testing.T, h map[string][]string) {
			if v := h["X-Kind"]; len(v) != 1 {
				t.Errorf("X-Kind %q, want it passed on", v)
			}
		}},
		{name: "POST with body", method: "POST", status: 200, body: "POST /2"},
		{name: "304 keeps its fields", method: "GET", status: 304, check: func(t *testing.T, h map[string][]string) {
			if v := h["Etag"]; len(v) != 1 || v[0] != `"v1"` {
				t.Errorf("Etag %q", v)
			}
		}},
		{name: "last", method: "GET", status: 200, body: "GET /3"},
	}
	for _, tt := range tests {
		resp, body := readResponse(t, br, tt.method)
		if resp.StatusCode != tt.status || body != tt.body {
			t.Fatalf("%s: got %d %q, want %d %q", tt.name, resp.StatusCode, body, tt.status, tt.body)
		}
		if tt.check != nil {
			tt.check(t, resp.Header)
		}
	}
	if n := br.Buffered(); n != 0 {
		t.Errorf("%d bytes after the last response: %q", n, must(br.Peek(n)))
	}
}

func must(b []byte, _ error) []byte { return b }

// TestBodilessResponsesHaveNoBody reads each bodiless response on its own
// connection, as raw bytes, up to a following response to a GET.
func TestBodilessResponsesHaveNoBody(t *testing.T) {
	tests := []struct {
		name, req string
	}{
		{"HEAD", "HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"204", "GET /204 HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"304", "GET /304 HTTP/1.1\r\nHost: x\r\n\r\n"},
	}
	rb := bodilessBackend(t)
	r := startRelay(t, Config{}, rb.b)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, br := dialRelay(t, r)
			write(t, c, tt.req+"GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
			if _, _, err := readHead(br); err != nil {
				t.Fatal(err)
			}
			line, err := br.ReadString('\n')
			if err != nil || line != "HTTP/1.1 200 OK\r\n" {
				t.Errorf("after the bodiless response came %q (%v), want the next response", line, err)
			}
		})
	}
}

// TestUpstreamConnectionsAreReused: with keep-alive on both sides, relay
// opens no more connections to the backend than there are clients at once,
// however many requests they send. Each client is one raw connection, so
// the client side cannot open extra ones either.
func TestUpstreamConnectionsAreReused(t *testing.T) {
	const clients, perClient = 8, 30
	hb := newHTTPBackend(t, "a", 1, nil)
	r := startRelay(t, Config{}, hb.b)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := 0; i < clients; i++ {
		c, br := dialRelay(t, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < perClient; j++ {
				req, method := "GET / HTTP/1.1\r\nHost: x\r\n\r\n", "GET"
				if j%2 == 1 {
					req, method = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody", "POST"
				}
				if _, err := io.WriteString(c, req); err != nil {
					errs <- err
					return
				}
				resp, err := http.ReadResponse(br, &http.Request{Method: method})
				if err != nil {
					errs <- err
					return
				}
				b, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != 200 || string(b) != "a" || resp.Close {
					errs <- fmt.Errorf("request %d: %d %q close=%v %v", j, resp.StatusCode, b, resp.Close, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := hb.hits.Load(); got != clients*perClient {
		t.Errorf("backend saw %d requests, want %d", got, clients*perClient)
	}
	up := hb.ln.accepts.Load()
	t.Logf("%d requests from %d clients over %d upstream connections", clients*perClient, clients, up)
	if up > clients {
		t.Errorf("relay opened %d upstream connections for %d concurrent clients", up, clients)
	}
}

func TestConnectionPersistence(t *testing.T) {
	tests := []struct {
		name      string
		req       string
		wantClose bool
		wantConn  string // the Connection field relay keeps the connection with
	}{
		{"HTTP/1.1 stays open", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", false, ""},
		{"HTTP/1.1 asking to close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", true, ""},
		{"HTTP/1.0 closes by default", "GET / HTTP/1.0\r\n\r\n", true, ""},
		{"HTTP/1.0 asking for keep-alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false, "keep-alive"},
	}
	rb := bodilessBackend(t)
	r := startRelay(t, Config{}, rb.b)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, br := dialRelay(t, r)
			for i := 0; i < 2; i++ {
				write(t, c, tt.req)
				resp, body := readResponse(t, br, "GET")
				if resp.StatusCode != 200 || body != "GET /" {
					t.Fatalf("response %d: %d %q", i, resp.StatusCode, body)
				}
				// net/http's reader turns Connection: close into Close.
				if resp.Close != tt.wantClose {
					t.Errorf("Connection: close is %v, want %v", resp.Close, tt.wantClose)
				}
				if got := resp.Header.Get("Connection"); !tt.wantClose && !strings.EqualFold(got, tt.wantConn) {
					t.Errorf("Connection %q, want %q", got, tt.wantConn)
				}
				if tt.wantClose {
					expectClosed(t, c, br)
					return
				}
			}
		})
	}
}

// TestClientTimeouts: a client that sends half a head is answered 408; one
// that goes quiet between requests is closed without an answer.
func TestClientTimeouts(t *testing.T) {
	tests := []struct {
		name       string
		first      string // a complete request sent first, if any
		rest       string // what the client sends and then stalls on
		wantStatus int    // 0: closed without an answer
	}{
		{name: "half a head", rest: "GET / HTTP/1.1\r\nHost:", wantStatus: 408},
		{name: "half a second head", first: "GET / HTTP/1.1\r\nHost: x\r\n\r\n", rest: "GET / HT", wantStatus: 408},
		{name: "idle keep-alive connection", first: "GET / HTTP/1.1\r\nHost: x\r\n\r\n"},
	}
	rb := bodilessBackend(t)
	r := startRelay(t, Config{HeaderTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond}, rb.b)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, br := dialRelay(t, r)
			if tt.first != "" {
				write(t, c, tt.first)
				if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
					t.Fatalf("first request: %d", resp.StatusCode)
				}
			}
			write(t, c, tt.rest)
			start := time.Now()
			if tt.wantStatus != 0 {
				if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != tt.wantStatus {
					t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
				}
			}
			expectClosed(t, c, br)
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("closed after %v with 100ms timeouts", d)
			}
		})
	}
}

// TestStrayBytesAfterResponseEndReuse: a backend that sends a body after
// its answer to HEAD has left bytes no request asked for. The connection
// must not go back to the pool, or those bytes would be read as the next
// request's response.
func TestStrayBytesAfterResponseEndReuse(t *testing.T) {
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		for {
			req, err := rb.next(br)
			if err != nil {
				return
			}
			resp := okResponse(req.Method + " " + req.Target)
			if req.Method == "HEAD" {
				resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray"
			}
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	})
	cfg := withDefaults(Config{})
	cfg.Pool.Retries = 0
	r := startRelayExactly(t, cfg, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := readResponse(t, br, "HEAD"); resp.StatusCode != 200 {
		t.Fatalf("HEAD: status %d", resp.StatusCode)
	}
	// Let the stray body reach relay before the next request goes out.
	time.Sleep(50 * time.Millisecond)
	write(t, c, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	if resp.StatusCode != 200 || body != "GET /next" {
		t.Fatalf("the request after the stray bytes got %d %q, want 200 \"GET /next\"", resp.StatusCode, body)
	}
}
