package h2

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
)

// A field value that starts or ends with a space or a tab makes a request
// malformed (RFC 9113 8.2.1): the stream is reset with PROTOCOL_ERROR, as
// for relay's other malformed requests, nothing reaches the backend, and
// the connection goes on. Spaces and tabs inside a value are fine.
func TestUntrimmedFieldValuesAreMalformed(t *testing.T) {
	b, heads := headBackend(t)
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	id := uint32(1)
	for _, tc := range []struct {
		name   string
		fields []string
	}{
		{"a leading space", request("GET", "/", "x-token", " secret")},
		{"a trailing space", request("GET", "/", "x-token", "secret ")},
		{"a leading tab", request("GET", "/", "x-token", "\tsecret")},
		{"a trailing tab", request("GET", "/", "x-token", "secret\t")},
		{"a value of one space", request("GET", "/", "x-token", " ")},
		{"a cookie with a trailing space", request("GET", "/", "cookie", "a=1 ")},
		{"an authority with a trailing space", []string{":method", "GET", ":scheme", "http", ":authority", "relay.test ", ":path", "/"}},
		{"a content-length with a leading space", request("POST", "/", "content-length", " 0")},
	} {
		rc.writeHeaders(id, true, tc.fields...)
		if r := rc.response(id); !r.reset || r.code != http2.ErrCodeProtocol || r.status != 0 {
			t.Errorf("%s: status %d, reset %v (%v); want RST_STREAM PROTOCOL_ERROR", tc.name, r.status, r.reset, r.code)
		}
		id += 2
	}
	select {
	case h := <-heads:
		t.Fatalf("a malformed request reached the backend:\n%s", h)
	default:
	}
	rc.get(id, "/", "x-token", "inner space\tand tab", "x-empty", "")
	if r := rc.response(id); r.status != 200 {
		t.Fatalf("a well-formed request after them: status %d, reset %v (%v)", r.status, r.reset, r.code)
	}
	if head := await(t, heads, "the well-formed request"); !strings.Contains(head, "\r\nX-Token: inner space\tand tab\r\n") &&
		!strings.Contains(head, "\r\nx-token: inner space\tand tab\r\n") {
		t.Errorf("the backend got:\n%s\nwant x-token as sent", head)
	}
}

// A trailer section with a pseudo-field, a connection-specific field or
// an untrimmed value is malformed (RFC 9113 8.1, 8.2.1, 8.2.2): the stream
// is reset with PROTOCOL_ERROR and the backend never gets the request
// whole (it gets nothing, or a body cut short). Field names in upper case
// are refused by the frame reader the same way. A well-formed trailer
// section ends the body, and the request is forwarded.
func TestMalformedTrailersResetTheStream(t *testing.T) {
	var whole atomic.Int32
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if data, err := io.ReadAll(r.Body); err == nil && string(data) == "abc" {
			whole.Add(1)
			io.WriteString(w, "ok")
		}
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	id := uint32(1)
	for _, tc := range []struct {
		name     string
		trailers []string
	}{
		{":method", []string{":method", "GET"}},
		{":path", []string{":path", "/other"}},
		{":status", []string{":status", "200"}},
		{"a field, then :authority", []string{"x-checksum", "1", ":authority", "evil.test"}},
		{"connection", []string{"connection", "close"}},
		{"transfer-encoding", []string{"transfer-encoding", "chunked"}},
		{"te: gzip", []string{"te", "gzip"}},
		{"an untrimmed value", []string{"x-checksum", "1 "}},
		{"an upper-case name", []string{"X-Checksum", "1"}},
	} {
		rc.writeHeaders(id, false, request("POST", "/")...)
		rc.fr.WriteData(id, false, []byte("abc"))
		rc.writeHeaders(id, true, tc.trailers...)
		if r := rc.response(id); !r.reset || r.code != http2.ErrCodeProtocol || r.status != 0 {
			t.Errorf("trailers with %s: status %d, reset %v (%v); want RST_STREAM PROTOCOL_ERROR", tc.name, r.status, r.reset, r.code)
		}
		id += 2
	}
	rc.writeHeaders(id, false, request("POST", "/")...)
	rc.fr.WriteData(id, false, []byte("abc"))
	rc.writeHeaders(id, true, "x-checksum", "1", "te", "trailers")
	if r := rc.response(id); r.status != 200 || string(r.body) != "ok" {
		t.Errorf("well-formed trailers: status %d, body %q, reset %v (%v)", r.status, r.body, r.reset, r.code)
	}
	if n := whole.Load(); n != 1 {
		t.Errorf("the backend got %d whole requests, want only the one with well-formed trailers", n)
	}
}

// rawHead reads one HTTP/1.1 request head from br, for backends written
// byte by byte.
func rawHead(br *bufio.Reader) (string, error) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return head.String(), err
		}
		head.WriteString(line)
		if line == "\r\n" {
			return head.String(), nil
		}
	}
}

// countingConn counts the bytes written through it.
type countingConn struct {
	net.Conn
	n atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}
