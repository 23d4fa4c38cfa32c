package proxy

import (
	"testing"
)

// TestTrailersCarryNoForbiddenFields: over HTTP/1.1 too, a trailer section
// passes without the fields no trailer may carry (framing, routing,
// authentication, response controls) and without X-Request-Id, both
// ways: a client cannot hand the backend a second request id, nor a
// Host or Transfer-Encoding after the body, and the client gets only the
// id in the response's head.
func TestTrailersCarryNoForbiddenFields(t *testing.T) {
	rb, reqs := recordingBackend(t, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"2\r\nok\r\n0\r\nX-Request-Id: backend-chosen\r\nSet-Cookie: a=1\r\nX-Sum: 2\r\n\r\n")
	r := startRelay(t, Config{RequestID: true}, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\n0\r\nX-Request-Id: client-chosen\r\nHost: evil.test\r\n"+
		"Transfer-Encoding: chunked\r\nx-request-ID: again\r\nX-Sum: 11\r\n\r\n")
	resp, body := readResponse(t, br, "POST")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("response %d %q", resp.StatusCode, body)
	}
	req := <-reqs
	if string(req.Body) != "hello" {
		t.Errorf("backend got body %q", req.Body)
	}
	for _, name := range []string{"X-Request-Id", "Host", "Transfer-Encoding"} {
		if v := req.Trailer.Values(name); len(v) != 0 {
			t.Errorf("backend got trailer %s %q, want none", name, v)
		}
	}
	if v := req.Trailer.Get("X-Sum"); v != "11" {
		t.Errorf("backend got trailer X-Sum %q, want 11", v)
	}
	for _, name := range []string{"X-Request-Id", "Set-Cookie"} {
		if v := resp.Trailer.Values(name); len(v) != 0 {
			t.Errorf("client got trailer %s %q, want none", name, v)
		}
	}
	if v := resp.Trailer.Get("X-Sum"); v != "2" {
		t.Errorf("client got trailer X-Sum %q, want 2", v)
	}
}

// TestResponseTrailersConnectionNamed: a field the response head's
// Connection field names is for the hop from the backend only, in the
// trailers as in the head, over HTTP/1.1 as over HTTP/2.
func TestResponseTrailersConnectionNamed(t *testing.T) {
	rb, _ := recordingBackend(t, "HTTP/1.1 200 OK\r\nConnection: X-Hop, x-other\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"2\r\nok\r\n0\r\nx-hop: 1\r\nX-Other: 2\r\nX-Sum: 3\r\n\r\n")
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	for range 2 { // the connection's buffers are reused
		write(t, c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("response %d %q", resp.StatusCode, body)
		}
		for _, name := range []string{"X-Hop", "X-Other"} {
			if v := resp.Trailer.Values(name); len(v) != 0 {
				t.Errorf("client got trailer %s %q, want none: the head's Connection field names it", name, v)
			}
		}
		if v := resp.Trailer.Get("X-Sum"); v != "3" {
			t.Errorf("client got trailer X-Sum %q, want 3", v)
		}
	}
}
