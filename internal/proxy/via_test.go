package proxy

import (
	"strings"
	"testing"
)

// TestLoop508KeepsTheConnection: the core answers a request that carries
// relay's own Via entry 508 (internal/core's via tests); the HTTP/1.1 door
// writes it as 508 Loop Detected and the connection serves the next
// request, while one whose body went unread is closed.
func TestLoop508KeepsTheConnection(t *testing.T) {
	const instance = "0123456789abcdef"
	rb, reqs := recordingBackend(t, okResponse("ok"))
	r := startRelay(t, Config{Instance: instance}, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET /loop HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 relay-"+instance+"\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	if resp.StatusCode != 508 || resp.Status != "508 Loop Detected" || !strings.Contains(body, "passed through this relay already") || resp.Close {
		t.Fatalf("%s %q (close %v); want 508 Loop Detected, the connection kept", resp.Status, body, resp.Close)
	}
	write(t, c, "GET /next HTTP/1.1\r\nHost: a.test\r\n\r\n")
	if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
		t.Errorf("the next request on the connection got %d", resp.StatusCode)
	}
	if req := <-reqs; req.Target != "/next" {
		t.Errorf("the backend got %s", req.Target)
	}
	write(t, c, "POST /loop HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 relay-"+instance+"\r\nContent-Length: 5\r\n\r\nhello")
	if resp, _ := readResponse(t, br, "POST"); resp.StatusCode != 508 || !resp.Close {
		t.Errorf("a POST that came round: %d (close %v), want 508 and the connection closed", resp.StatusCode, resp.Close)
	}
	expectClosed(t, c, br)
	if n := rb.hits.Load(); n != 1 {
		t.Errorf("the backend got %d requests, want only the one that did not come round", n)
	}
}
