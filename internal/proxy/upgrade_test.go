package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestExpectContinue plays a client that sends its body only after relay
// says 100 Continue.
func TestExpectContinue(t *testing.T) {
	rb, reqs := recordingBackend(t, okResponse("stored"))
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "PUT /file HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n")
	line, h, err := readHead(br)
	if err != nil {
		t.Fatalf("waiting for 100 Continue: %v", err)
	}
	if line != "HTTP/1.1 100 Continue" || len(h) != 0 {
		t.Fatalf("got %q %v, want a bare 100 Continue", line, h)
	}
	write(t, c, "hello world")
	resp, body := readResponse(t, br, "PUT")
	if resp.StatusCode != 200 || body != "stored" {
		t.Errorf("final response %d %q", resp.StatusCode, body)
	}
	req := <-reqs
	if string(req.Body) != "hello world" {
		t.Errorf("backend got body %q", req.Body)
	}
	if v, ok := req.Header["Expect"]; ok {
		t.Errorf("backend got Expect %q; relay answers it itself", v)
	}
	// The connection goes on serving.
	write(t, c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
		t.Errorf("next request: %d", resp.StatusCode)
	}
}

// echoUpgradeBackend switches to an echo protocol when asked to upgrade
// and reports the upgrade request it got.
func echoUpgradeBackend(t *testing.T, reqs chan<- *rawRequest) *rawBackend {
	return newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		req, err := rb.next(br)
		if err != nil {
			return
		}
		reqs <- req
		if req.Header.Get("Upgrade") == "" {
			io.WriteString(c, okResponse("not upgraded"))
			return
		}
		// The first echoed bytes go out with the 101, as servers that
		// greet in the new protocol do.
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\nX-Session: 7\r\n\r\nhi\n")
		// Plain reads and writes: a splice would open pipes in this
		// process, which the descriptor tests count as relay's.
		io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{br})
	})
}

func TestUpgradedConnectionCarriesBytesBothWays(t *testing.T) {
	reqs := make(chan *rawRequest, 1)
	rb := echoUpgradeBackend(t, reqs)
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	// The first message rides along with the request head.
	write(t, c, "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: echo\r\n\r\nfirst\n")
	line, h, err := readHead(br)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, "HTTP/1.1 101 ") {
		t.Fatalf("status line %q, want 101", line)
	}
	if h.Get("Upgrade") != "echo" || !strings.EqualFold(h.Get("Connection"), "upgrade") || h.Get("X-Session") != "7" {
		t.Errorf("101 fields %v", h)
	}
	req := <-reqs
	if req.Header.Get("Upgrade") != "echo" || !strings.EqualFold(req.Header.Get("Connection"), "upgrade") {
		t.Errorf("backend got Upgrade %q Connection %q", req.Header.Get("Upgrade"), req.Header.Get("Connection"))
	}
	for _, want := range []string{"hi\n", "first\n"} {
		if got, err := br.ReadString('\n'); got != want {
			t.Fatalf("got %q (%v), want %q", got, err, want)
		}
	}
	for _, msg := range []string{"ping\n", strings.Repeat("x", 100<<10) + "\n", "bye\n"} {
		write(t, c, msg)
		if got, err := br.ReadString('\n'); got != msg {
			t.Fatalf("echo of %d bytes: got %d bytes (%v)", len(msg), len(got), err)
		}
	}
	// Closing our side ends the backend's echo, which closes the rest.
	c.(*net.TCPConn).CloseWrite()
	expectClosed(t, c, br)
}

// TestUpgradeWithoutConnectionTokenIsPlainRequest: Upgrade alone, without
// Connection: upgrade, asks for nothing and is dropped as hop-by-hop.
func TestUpgradeWithoutConnectionTokenIsPlainRequest(t *testing.T) {
	reqs := make(chan *rawRequest, 1)
	rb := echoUpgradeBackend(t, reqs)
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET /chat HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	if resp.StatusCode != 200 || body != "not upgraded" {
		t.Errorf("got %d %q, want a plain answer", resp.StatusCode, body)
	}
	if req := <-reqs; req.Header.Get("Upgrade") != "" {
		t.Errorf("backend got Upgrade %q", req.Header.Get("Upgrade"))
	}
}

// TestUnaskedSwitchIsRefused: a backend that answers 101 to a request that
// asked for no upgrade is broken; the client gets 502.
func TestUnaskedSwitchIsRefused(t *testing.T) {
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		if _, err := rb.next(br); err == nil {
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		}
	})
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 502 {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
}

// A tunnel in which neither side sends anything for tunnel_idle_timeout
// is closed, its two descriptors with it; one that keeps talking is not.
func TestIdleTunnelIsClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	reqs := make(chan *rawRequest, 4)
	rb := echoUpgradeBackend(t, reqs)
	r := startRelay(t, Config{TunnelIdleTimeout: idle}, rb.b)
	open := func() (net.Conn, *bufio.Reader) {
		c, br := dialRelay(t, r)
		write(t, c, "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		if line, _, err := readHead(br); err != nil || !strings.HasPrefix(line, "HTTP/1.1 101 ") {
			t.Fatalf("status line %q (%v), want 101", line, err)
		}
		if got, _ := br.ReadString('\n'); got != "hi\n" {
			t.Fatalf("greeting %q", got)
		}
		return c, br
	}

	// A talking client keeps its tunnel for many timeouts.
	c, br := open()
	for i := range 10 {
		time.Sleep(idle / 3)
		msg := fmt.Sprintf("ping %d\n", i)
		write(t, c, msg)
		if got, err := br.ReadString('\n'); got != msg {
			t.Fatalf("after %v of talk: got %q (%v), want the echo", time.Duration(i+1)*idle/3, got, err)
		}
	}

	// A silent one is closed once the timeout has passed.
	start := time.Now()
	expectClosed(t, c, br)
	if took := time.Since(start); took < idle || took > idle+2*time.Second {
		t.Fatalf("a silent tunnel closed after %v, want about %v", took, idle)
	}
}
