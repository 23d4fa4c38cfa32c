package proxy

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A backend that reads a request's head and then stops reading its body
// fails the request once it has taken no bytes for response_timeout:
// relay answers, and lets go of the backend connection, instead of
// waiting with the client for ever.
func TestBackendThatStopsTakingTheBodyFailsTheRequest(t *testing.T) {
	const respTimeout = 300 * time.Millisecond
	headRead := make(chan struct{}, 1)
	released := make(chan struct{})
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		if _, _, err := readHead(br); err != nil {
			return
		}
		headRead <- struct{}{}
		// Read nothing more; the connection is closed when relay lets go.
		c.SetReadDeadline(time.Now().Add(ioTimeout))
		<-released
	})
	defer close(released)
	cfg := withDefaults(Config{})
	cfg.Pool.ResponseTimeout = respTimeout
	cfg.Pool.Retries = 0
	r := startRelayExactly(t, cfg, rb.b)

	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	const size = 256 << 20 // far more than the sockets between hold
	fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: relay.test\r\nContent-Length: %d\r\n\r\n", size)
	go func() {
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return // relay answered and closed
			}
		}
	}()
	select {
	case <-headRead:
	case <-time.After(ioTimeout):
		t.Fatal("the request never reached the backend")
	}
	start := time.Now()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer from relay: %v", err)
	}
	res.Body.Close()
	took := time.Since(start)
	t.Logf("answered %d %v after the backend stopped reading", res.StatusCode, took.Round(time.Millisecond))
	if res.StatusCode != http.StatusGatewayTimeout && res.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 504 or 502", res.StatusCode)
	}
	if took > respTimeout+3*time.Second {
		t.Errorf("answered after %v, want within response_timeout (%v) and a little more", took, respTimeout)
	}
}
