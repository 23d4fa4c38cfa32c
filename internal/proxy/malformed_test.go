package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http/httputil"
	"strings"
	"testing"
)

// headLimit is the MaxHeaderBytes of TestMalformedRequestsNeverReachBackend.
const headLimit = 4 << 10

func TestMalformedRequestsNeverReachBackend(t *testing.T) {
	tests := []struct {
		name   string
		req    string
		status int
	}{
		{"Content-Length with Transfer-Encoding", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"two different Content-Lengths", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400},
		{"Content-Length list that disagrees", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\nhello!", 400},
		{"Content-Length not a number", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello", 400},
		{"unknown coding before chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
		{"Transfer-Encoding without chunked", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
		{"Transfer-Encoding in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},
		{"bare LF", "GET / HTTP/1.1\nHost: x\n\n", 400},
		{"bare LF after a field", "GET / HTTP/1.1\r\nHost: x\nX-A: b\r\n\r\n", 400},
		{"bare CR", "GET / HTTP/1.1\r\nHost: x\rX-A: b\r\n\r\n", 400},
		{"NUL in a field value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400},
		{"control character in a field value", "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", 400},
		{"missing Host on HTTP/1.1", "GET / HTTP/1.1\r\nX-A: b\r\n\r\n", 400},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400},
		{"malformed Host", "GET / HTTP/1.1\r\nHost: x y\r\n\r\n", 400},
		{"malformed request line", "GET /\r\nHost: x\r\n\r\n", 400},
		{"unsupported version", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"CONNECT authority form", "CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", 400},
		// Exactly the limit and no end of head: relay reads it all,
		// so the client can read the answer without a reset.
		{"oversized head", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", headLimit-len("GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")), 431},
	}
	hb := newHTTPBackend(t, "a", 1, nil)
	r := startRelay(t, Config{MaxHeaderBytes: headLimit}, hb.b)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, br := dialRelay(t, r)
			write(t, c, tt.req)
			resp, body := readResponse(t, br, "GET")
			if resp.StatusCode != tt.status {
				t.Errorf("status %d %q, want %d", resp.StatusCode, body, tt.status)
			}
			if !resp.Close {
				t.Errorf("error response lacks Connection: close")
			}
			expectClosed(t, c, br)
		})
	}
	if n := hb.hits.Load(); n != 0 {
		t.Errorf("backend saw %d malformed requests, want none", n)
	}
}

// TestOversizedHeadIsAnswered sends a head well past the limit. relay stops
// reading at the limit, so part of the head is never read; the client must
// still be able to read the 431.
func TestOversizedHeadIsAnswered(t *testing.T) {
	hb := newHTTPBackend(t, "a", 1, nil)
	r := startRelay(t, Config{MaxHeaderBytes: headLimit}, hb.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 4*headLimit)+"\r\n\r\n")
	resp, _ := readResponse(t, br, "GET")
	if resp.StatusCode != 431 {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
	if n := hb.hits.Load(); n != 0 {
		t.Errorf("backend saw %d requests, want none", n)
	}
}

// TestMalformedRequestAfterGoodOne: the first request on a connection is
// answered normally; the bad second one ends the connection.
func TestMalformedRequestAfterGoodOne(t *testing.T) {
	hb := newHTTPBackend(t, "a", 1, nil)
	r := startRelay(t, Config{}, hb.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")
	if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != "a" {
		t.Errorf("first response %d %q", resp.StatusCode, body)
	}
	if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 400 {
		t.Errorf("second response %d, want 400", resp.StatusCode)
	}
	expectClosed(t, c, br)
	if n := hb.hits.Load(); n != 1 {
		t.Errorf("backend saw %d requests, want 1", n)
	}
}

// TestBadChunkFramingCutsTheRequestOff: a chunked body is streamed, so its
// head is already with the backend when bad framing turns up. The backend
// must then see the body end abruptly, never a well-formed end that would
// make the truncated body look complete, and the client connection must end.
func TestBadChunkFramingCutsTheRequestOff(t *testing.T) {
	got := make(chan error, 1)
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		if _, _, err := readHead(br); err != nil {
			got <- err
			return
		}
		_, err := io.ReadAll(httputil.NewChunkedReader(br))
		got <- err
	})
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nworld\r\n0\r\n\r\n")
	if err := <-got; err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("backend read the body with error %v, want it cut off", err)
	}
	// The client is told why, and the connection ends.
	if resp, _ := readResponse(t, br, "POST"); resp.StatusCode != 400 {
		t.Errorf("client got %d, want 400", resp.StatusCode)
	}
	expectClosed(t, c, br)
}
