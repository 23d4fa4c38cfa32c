package h1

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

const host = "Host: example.com\r\n"

func TestParseRequestRejects(t *testing.T) {
	tests := []struct {
		name   string
		head   string
		want   error
		status int
	}{
		// Framing: anything two parsers could read differently.
		{"length and chunked", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", ErrLengthAndEncoding, 400},
		{"chunked and length", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", ErrLengthAndEncoding, 400},
		{"chunked and zero length", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n", ErrLengthAndEncoding, 400},
		{"differing length fields", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", ErrConflictingLength, 400},
		{"differing length list", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5, 6\r\n\r\n", ErrConflictingLength, 400},
		{"same length spelled differently", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\nContent-Length: 05\r\n\r\n", ErrConflictingLength, 400},
		{"empty length", "POST / HTTP/1.1\r\n" + host + "Content-Length:\r\n\r\n", ErrContentLength, 400},
		{"negative length", "POST / HTTP/1.1\r\n" + host + "Content-Length: -1\r\n\r\n", ErrContentLength, 400},
		{"signed length", "POST / HTTP/1.1\r\n" + host + "Content-Length: +5\r\n\r\n", ErrContentLength, 400},
		{"hex length", "POST / HTTP/1.1\r\n" + host + "Content-Length: 0x5\r\n\r\n", ErrContentLength, 400},
		{"length with inner space", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5 5\r\n\r\n", ErrContentLength, 400},
		{"length list with empty element", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5,\r\n\r\n", ErrContentLength, 400},
		{"length of 19 digits", "POST / HTTP/1.1\r\n" + host + "Content-Length: 1000000000000000000\r\n\r\n", ErrContentLength, 400},
		{"gzip only", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\n\r\n", ErrTransferEncoding, 400},
		{"identity", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: identity\r\n\r\n", ErrTransferEncoding, 400},
		{"chunked not last", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked, gzip\r\n\r\n", ErrTransferEncoding, 400},
		{"chunked twice in a list", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked, chunked\r\n\r\n", ErrTransferEncoding, 400},
		{"chunked in two fields", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", ErrTransferEncoding, 400},
		{"chunked with trailing comma", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked,\r\n\r\n", ErrTransferEncoding, 400},
		{"chunked with leading comma", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: , chunked\r\n\r\n", ErrTransferEncoding, 400},
		{"empty transfer-encoding", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding:\r\n\r\n", ErrTransferEncoding, 400},
		{"empty field before chunked", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: \r\nTransfer-Encoding: chunked\r\n\r\n", ErrTransferEncoding, 400},
		{"chunked with suffix", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunkedx\r\n\r\n", ErrTransferEncoding, 400},
		{"coding with a space", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: a b, chunked\r\n\r\n", ErrTransferEncoding, 400},
		{"quoted chunked", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: \"chunked\"\r\n\r\n", ErrTransferEncoding, 400},
		{"unknown coding before chunked", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip, chunked\r\n\r\n", ErrUnknownEncoding, 501},
		{"unknown coding in its own field", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", ErrUnknownEncoding, 501},
		{"transfer-encoding in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", ErrEncodingHTTP10, 400},

		// Field syntax.
		{"space before colon", "GET / HTTP/1.1\r\nHost : example.com\r\n\r\n", ErrWhitespaceColon, 400},
		{"tab before colon", "GET / HTTP/1.1\r\n" + host + "Content-Length\t: 0\r\n\r\n", ErrWhitespaceColon, 400},
		{"obs-fold", "GET / HTTP/1.1\r\n" + host + "X-A: one\r\n two\r\n\r\n", ErrObsFold, 400},
		{"obs-fold with tab", "GET / HTTP/1.1\r\n" + host + "X-A: one\r\n\ttwo\r\n\r\n", ErrObsFold, 400},
		{"space before first field", "GET / HTTP/1.1\r\n " + host + "\r\n", ErrObsFold, 400},
		{"bare CR in value", "GET / HTTP/1.1\r\n" + host + "X-A: a\rb\r\n\r\n", ErrBareCR, 400},
		{"CR CR LF", "GET / HTTP/1.1\r\n" + host + "X-A: a\r\r\n\r\n", ErrBareCR, 400},
		{"bare CR as a line", "GET / HTTP/1.1\r\n" + host + "\rX-A: a\r\n\r\n", ErrBareCR, 400},
		{"bare CR in request line", "GET /\r HTTP/1.1\r\n" + host + "\r\n", ErrBareCR, 400},
		{"bare LF ending a field", "GET / HTTP/1.1\r\n" + "Host: example.com\nX-A: a\r\n\r\n", ErrBareLF, 400},
		{"bare LF ending the head", "GET / HTTP/1.1\r\n" + host + "\n", ErrBareLF, 400},
		{"bare LF ending request line", "GET / HTTP/1.1\n" + host + "\r\n", ErrBareLF, 400},
		{"NUL in value", "GET / HTTP/1.1\r\n" + host + "X-A: a\x00b\r\n\r\n", ErrFieldValue, 400},
		{"NUL alone as value", "GET / HTTP/1.1\r\n" + host + "X-A: \x00\r\n\r\n", ErrFieldValue, 400},
		{"control char in value", "GET / HTTP/1.1\r\n" + host + "X-A: a\x01b\r\n\r\n", ErrFieldValue, 400},
		{"escape in value", "GET / HTTP/1.1\r\n" + host + "X-A: \x1b[31m\r\n\r\n", ErrFieldValue, 400},
		{"DEL in value", "GET / HTTP/1.1\r\n" + host + "X-A: a\x7fb\r\n\r\n", ErrFieldValue, 400},
		{"NUL in name", "GET / HTTP/1.1\r\n" + host + "X-\x00A: a\r\n\r\n", ErrFieldName, 400},
		{"empty name", "GET / HTTP/1.1\r\n" + host + ": a\r\n\r\n", ErrFieldName, 400},
		{"separator in name", "GET / HTTP/1.1\r\n" + host + "X(A): a\r\n\r\n", ErrFieldName, 400},
		{"non-ASCII name", "GET / HTTP/1.1\r\n" + host + "X-\xc3\xa9: a\r\n\r\n", ErrFieldName, 400},
		{"line without colon", "GET / HTTP/1.1\r\n" + host + "X-A\r\n\r\n", ErrFieldName, 400},

		// Host.
		{"missing host", "GET / HTTP/1.1\r\n\r\n", ErrMissingHost, 400},
		{"missing host with absolute form", "GET http://example.com/ HTTP/1.1\r\n\r\n", ErrMissingHost, 400},
		{"two hosts", "GET / HTTP/1.1\r\n" + host + host + "\r\n", ErrDuplicateHost, 400},
		{"two hosts in HTTP/1.0", "GET / HTTP/1.0\r\n" + host + "host: b\r\n\r\n", ErrDuplicateHost, 400},
		{"host with space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", ErrBadHost, 400},
		{"host with userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", ErrBadHost, 400},
		{"host with path", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", ErrBadHost, 400},
		{"host with letters in port", "GET / HTTP/1.1\r\nHost: a:http\r\n\r\n", ErrBadHost, 400},
		{"host with two colons", "GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", ErrBadHost, 400},
		{"percent-encoded host", "GET / HTTP/1.1\r\nHost: %61\r\n\r\n", ErrBadHost, 400},
		{"unclosed IP literal", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", ErrBadHost, 400},
		{"IP literal not IPv6", "GET / HTTP/1.1\r\nHost: [1.2.3.4]\r\n\r\n", ErrBadHost, 400},
		{"IP literal with zone", "GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n", ErrBadHost, 400},
		{"garbage after IP literal", "GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", ErrBadHost, 400},
		{"bad authority in target", "GET http://a:b/ HTTP/1.1\r\n" + host + "\r\n", ErrBadHost, 400},

		// Request line.
		{"empty request line", "\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"no version", "GET /\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"no target", "GET\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"two spaces", "GET  / HTTP/1.1\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"leading space", " GET / HTTP/1.1\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"trailing space", "GET / HTTP/1.1 \r\n" + host + "\r\n", ErrRequestLine, 400},
		{"tab separator", "GET\t/\tHTTP/1.1\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"space in target", "GET /a b HTTP/1.1\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"lower-case version", "GET / http/1.1\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"two-digit minor", "GET / HTTP/1.10\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"NUL in request line", "GET /\x00 HTTP/1.1\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"separator in method", "G(T / HTTP/1.1\r\n" + host + "\r\n", ErrMethod, 400},
		{"HTTP/1.2", "GET / HTTP/1.2\r\n" + host + "\r\n", ErrVersion, 505},
		{"HTTP/2.0", "GET / HTTP/2.0\r\n" + host + "\r\n", ErrVersion, 505},
		{"HTTP/0.9", "GET / HTTP/0.9\r\n" + host + "\r\n", ErrVersion, 505},

		// Target.
		{"asterisk for GET", "GET * HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},
		{"relative target", "GET a/b HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},
		{"authority form", "CONNECT example.com:443 HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},
		{"ftp scheme", "GET ftp://example.com/ HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},
		{"userinfo in target", "GET http://u@example.com/ HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},
		{"empty authority", "GET http:///a HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},
		{"query without path", "GET http://example.com?q HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},
		{"non-ASCII target", "GET /\xc3\xa9 HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},
		{"DEL in target", "GET /\x7f HTTP/1.1\r\n" + host + "\r\n", ErrRequestLine, 400},
		{"bad percent-encoding", "GET /%zz HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},
		{"short percent-encoding", "GET /a%4 HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},
		{"bad percent-encoding in absolute form", "GET http://example.com/%g0 HTTP/1.1\r\n" + host + "\r\n", ErrTarget, 400},

		// Size.
		{"too many fields", "GET / HTTP/1.1\r\n" + host + manyFields(maxFields) + "\r\n", ErrTooManyFields, 431},

		// Incomplete heads handed to ParseRequest directly.
		{"no line end", "GET / HTTP/1.1", ErrUnexpectedEOF, 0},
		{"no blank line", "GET / HTTP/1.1\r\n" + host, ErrUnexpectedEOF, 0},
		{"cut inside a field", "GET / HTTP/1.1\r\nHost: exa", ErrUnexpectedEOF, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req Request
			err := ParseRequest([]byte(tt.head), &req)
			checkErr(t, err, tt.want, tt.status)
		})
	}
}

func TestParseRequestAccepts(t *testing.T) {
	tests := []struct {
		name      string
		head      string
		method    string
		target    string
		host      string
		minor     int
		length    int64
		chunked   bool
		close     bool
		upgrade   string // UpgradeProto when Upgrade is set
		expect100 bool
	}{
		{name: "simple GET", head: "GET /a?b=c HTTP/1.1\r\n" + host + "\r\n",
			method: "GET", target: "/a?b=c", host: "example.com", minor: 1},
		{name: "absolute form", head: "GET http://example.org:8080/a?b HTTP/1.1\r\nHost: other\r\n\r\n",
			method: "GET", target: "/a?b", host: "example.org:8080", minor: 1},
		{name: "absolute form without path", head: "GET http://example.org HTTP/1.1\r\n" + host + "\r\n",
			method: "GET", target: "/", host: "example.org", minor: 1},
		{name: "absolute form upper-case https", head: "GET HTTPS://[::1]:8443/x HTTP/1.1\r\n" + host + "\r\n",
			method: "GET", target: "/x", host: "[::1]:8443", minor: 1},
		{name: "OPTIONS asterisk", head: "OPTIONS * HTTP/1.1\r\n" + host + "\r\n",
			method: "OPTIONS", target: "*", host: "example.com", minor: 1},
		{name: "HTTP/1.0 without host closes", head: "GET / HTTP/1.0\r\n\r\n",
			method: "GET", target: "/", minor: 0, close: true},
		{name: "HTTP/1.0 keep-alive", head: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
			method: "GET", target: "/", minor: 0},
		{name: "HTTP/1.0 keep-alive and close", head: "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
			method: "GET", target: "/", minor: 0, close: true},
		{name: "HTTP/1.1 close", head: "GET / HTTP/1.1\r\n" + host + "Connection: close\r\n\r\n",
			method: "GET", target: "/", host: "example.com", minor: 1, close: true},
		{name: "HTTP/1.1 close in a list", head: "GET / HTTP/1.1\r\n" + host + "Connection: x-a,  CLOSE \r\nX-A: 1\r\n\r\n",
			method: "GET", target: "/", host: "example.com", minor: 1, close: true},
		{name: "empty host", head: "GET / HTTP/1.1\r\nHost:\r\n\r\n",
			method: "GET", target: "/", host: "", minor: 1},
		{name: "host with port", head: "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n",
			method: "GET", target: "/", host: "127.0.0.1:8080", minor: 1},
		{name: "host with sub-delims", head: "GET / HTTP/1.1\r\nHost: a-b_c~d!$&'()*+,;=\r\n\r\n",
			method: "GET", target: "/", host: "a-b_c~d!$&'()*+,;=", minor: 1},
		{name: "IPv6 host", head: "GET / HTTP/1.1\r\nHost: [2001:db8::1]\r\n\r\n",
			method: "GET", target: "/", host: "[2001:db8::1]", minor: 1},
		{name: "length", head: "POST /up HTTP/1.1\r\n" + host + "Content-Length: 42\r\n\r\n",
			method: "POST", target: "/up", host: "example.com", minor: 1, length: 42},
		{name: "zero length", head: "POST /up HTTP/1.1\r\n" + host + "Content-Length: 0\r\n\r\n",
			method: "POST", target: "/up", host: "example.com", minor: 1},
		{name: "leading zeros in length", head: "POST / HTTP/1.1\r\n" + host + "Content-Length: 007\r\n\r\n",
			method: "POST", target: "/", host: "example.com", minor: 1, length: 7},
		{name: "identical length list", head: "POST / HTTP/1.1\r\n" + host + "Content-Length: 5, 5\r\n\r\n",
			method: "POST", target: "/", host: "example.com", minor: 1, length: 5},
		{name: "identical length fields", head: "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\ncontent-length:5 \r\n\r\n",
			method: "POST", target: "/", host: "example.com", minor: 1, length: 5},
		{name: "chunked", head: "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n",
			method: "POST", target: "/", host: "example.com", minor: 1, length: -1, chunked: true},
		{name: "chunked in odd case with OWS", head: "POST / HTTP/1.1\r\n" + host + "transfer-encoding: \t CHUNKED \t\r\n\r\n",
			method: "POST", target: "/", host: "example.com", minor: 1, length: -1, chunked: true},
		{name: "expect 100-continue", head: "PUT /f HTTP/1.1\r\n" + host + "Expect: 100-Continue\r\nContent-Length: 3\r\n\r\n",
			method: "PUT", target: "/f", host: "example.com", minor: 1, length: 3, expect100: true},
		{name: "expect 100-continue ignored in HTTP/1.0", head: "PUT /f HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n",
			method: "PUT", target: "/f", minor: 0, length: 3, close: true},
		{name: "websocket upgrade", head: "GET /ws HTTP/1.1\r\n" + host + "Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n",
			method: "GET", target: "/ws", host: "example.com", minor: 1, upgrade: "websocket"},
		{name: "upgrade field without connection option", head: "GET /ws HTTP/1.1\r\n" + host + "Upgrade: websocket\r\n\r\n",
			method: "GET", target: "/ws", host: "example.com", minor: 1},
		{name: "upgrade in HTTP/1.0 is not one", head: "GET /ws HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
			method: "GET", target: "/ws", minor: 0, close: true},
		{name: "extension method", head: "PROPFIND /d HTTP/1.1\r\n" + host + "\r\n",
			method: "PROPFIND", target: "/d", host: "example.com", minor: 1},
		{name: "lower-case method kept", head: "get / HTTP/1.1\r\n" + host + "\r\n",
			method: "get", target: "/", host: "example.com", minor: 1},
		{name: "raw percent in query", head: "GET /p%20q?discount=100% HTTP/1.1\r\n" + host + "\r\n",
			method: "GET", target: "/p%20q?discount=100%", host: "example.com", minor: 1},
		{name: "odd but visible target bytes", head: "GET /a{b}|c^d\"e`<f>#g HTTP/1.1\r\n" + host + "\r\n",
			method: "GET", target: "/a{b}|c^d\"e`<f>#g", host: "example.com", minor: 1},
		{name: "max fields", head: "GET / HTTP/1.1\r\n" + host + manyFields(maxFields-1) + "\r\n",
			method: "GET", target: "/", host: "example.com", minor: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req Request
			if err := ParseRequest([]byte(tt.head), &req); err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			if string(req.Method) != tt.method || string(req.Target) != tt.target ||
				string(req.Host) != tt.host || req.Minor != tt.minor {
				t.Errorf("got %q %q host %q minor %d, want %q %q host %q minor %d",
					req.Method, req.Target, req.Host, req.Minor, tt.method, tt.target, tt.host, tt.minor)
			}
			if req.ContentLength != tt.length || req.Chunked != tt.chunked {
				t.Errorf("length %d chunked %v, want %d %v", req.ContentLength, req.Chunked, tt.length, tt.chunked)
			}
			if req.HasBody() != (tt.length > 0 || tt.chunked) {
				t.Errorf("HasBody = %v", req.HasBody())
			}
			if req.Close != tt.close {
				t.Errorf("Close = %v, want %v", req.Close, tt.close)
			}
			if req.Upgrade != (tt.upgrade != "") || (tt.upgrade != "" && string(req.UpgradeProto) != tt.upgrade) {
				t.Errorf("Upgrade = %v %q, want %q", req.Upgrade, req.UpgradeProto, tt.upgrade)
			}
			if req.Expect100 != tt.expect100 {
				t.Errorf("Expect100 = %v, want %v", req.Expect100, tt.expect100)
			}
		})
	}
}

func TestParseRequestOWS(t *testing.T) {
	head := "GET / HTTP/1.1\r\n" + host +
		"X-A:value\r\n" +
		"X-B: \t spaced  out \t \r\n" +
		"X-C:\r\n" +
		"X-D: \t \r\n" +
		"X-E: in\tner  space\r\n" +
		"X-F: caf\xc3\xa9\r\n\r\n"
	var req Request
	if err := ParseRequest([]byte(head), &req); err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, value string }{
		{"Host", "example.com"}, {"X-A", "value"}, {"X-B", "spaced  out"}, {"X-C", ""},
		{"X-D", ""}, {"X-E", "in\tner  space"}, {"X-F", "caf\xc3\xa9"},
	}
	if len(req.Fields) != len(want) {
		t.Fatalf("got %d fields, want %d", len(req.Fields), len(want))
	}
	for i, w := range want {
		if f := req.Fields[i]; string(f.Name) != w.name || string(f.Value) != w.value {
			t.Errorf("field %d = %q: %q, want %q: %q", i, f.Name, f.Value, w.name, w.value)
		}
	}
}

func TestParseRequestHop(t *testing.T) {
	head := "POST / HTTP/1.1\r\n" +
		"Host: example.com\r\n" +
		"Connection: Keep-Alive, x-Trace ,, Upgrade\r\n" +
		"Keep-Alive: timeout=5\r\n" +
		"Proxy-Connection: keep-alive\r\n" +
		"TE: trailers\r\n" +
		"Trailer: X-Sum\r\n" +
		"Transfer-Encoding: chunked\r\n" +
		"Upgrade: h2c\r\n" +
		"Proxy-Authorization: Basic eA==\r\n" +
		"Proxy-Authenticate: Basic\r\n" +
		"Expect: 100-continue\r\n" +
		"X-Trace: 1\r\n" +
		"x-trace: 2\r\n" +
		"X-Forwarded-For: 10.0.0.1\r\n" +
		"Accept: */*\r\n" +
		"Cookie: a=b\r\n" +
		"Authorization: Bearer t\r\n" +
		"X-Tracer: kept\r\n\r\n"
	var req Request
	if err := ParseRequest([]byte(head), &req); err != nil {
		t.Fatal(err)
	}
	hop := fieldNames(req.Fields, true)
	wantHop := []string{"Host", "Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
		"Transfer-Encoding", "Upgrade", "Proxy-Authorization", "Proxy-Authenticate", "Expect", "X-Trace", "x-trace"}
	if !slices.Equal(hop, wantHop) {
		t.Errorf("hop fields = %q\nwant %q", hop, wantHop)
	}
	kept := fieldNames(req.Fields, false)
	wantKept := []string{"X-Forwarded-For", "Accept", "Cookie", "Authorization", "X-Tracer"}
	if !slices.Equal(kept, wantKept) {
		t.Errorf("forwarded fields = %q, want %q", kept, wantKept)
	}
	if !req.Upgrade || string(req.UpgradeProto) != "h2c" || req.Close || !req.Expect100 {
		t.Errorf("Upgrade %v %q Close %v Expect100 %v", req.Upgrade, req.UpgradeProto, req.Close, req.Expect100)
	}

	// Content-Length is framing and regenerated by the writer.
	head = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nX-Other: o\r\n\r\n"
	if err := ParseRequest([]byte(head), &req); err != nil {
		t.Fatal(err)
	}
	if got := fieldNames(req.Fields, true); !slices.Equal(got, []string{"Host", "Content-Length"}) {
		t.Errorf("hop fields = %q", got)
	}
}

// TestParseRequestReusesFields checks that parsing into a used Request
// resets every result and reuses the Fields array.
func TestParseRequestReusesFields(t *testing.T) {
	var req Request
	first := "POST /a HTTP/1.1\r\nHost: a\r\nConnection: upgrade, close\r\nUpgrade: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
	if err := ParseRequest([]byte(first), &req); err != nil {
		t.Fatal(err)
	}
	before := &req.Fields[:1][0]
	if err := ParseRequest([]byte("GET /b HTTP/1.1\r\nHost: b\r\n\r\n"), &req); err != nil {
		t.Fatal(err)
	}
	if req.Chunked || req.Close || req.Upgrade || req.Expect100 || req.ContentLength != 0 ||
		len(req.Fields) != 1 || req.UpgradeProto != nil || string(req.Host) != "b" {
		t.Errorf("stale state after reuse: %+v", req)
	}
	if &req.Fields[0] != before {
		t.Error("Fields array was not reused")
	}
}

func TestRequestMethods(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		idempotent bool
	}{
		{"GET", "GET", true}, {"HEAD", "HEAD", true}, {"OPTIONS", "OPTIONS", true}, {"TRACE", "TRACE", true},
		{"PUT", "PUT", true}, {"DELETE", "DELETE", true}, {"POST", "POST", false}, {"PATCH", "PATCH", false},
		{"lower-case get is another method", "get", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req Request
			if err := ParseRequest([]byte(tt.method+" / HTTP/1.1\r\nHost: a\r\n\r\n"), &req); err != nil {
				t.Fatal(err)
			}
			if req.Idempotent() != tt.idempotent {
				t.Errorf("Idempotent = %v", req.Idempotent())
			}
			if !req.IsMethod(tt.method) || req.IsMethod(strings.ToLower(tt.method)+"x") {
				t.Error("IsMethod mismatch")
			}
		})
	}
}

// Detach moves every byte a request refers to out of the Reader's buffer:
// overwriting the buffer afterwards leaves the request as it was.
func TestRequestDetach(t *testing.T) {
	raw := "PUT /p?q=1 HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-A: one\r\nContent-Length: 3\r\n\r\n"
	head := []byte(raw)
	var req Request
	if err := ParseRequest(head, &req); err != nil {
		t.Fatal(err)
	}
	show := func() string {
		s := fmt.Sprintf("%s %s %s %s", req.Method, req.Target, req.Host, req.UpgradeProto)
		for _, f := range req.Fields {
			s += fmt.Sprintf(" [%s: %s %v]", f.Name, f.Value, f.Hop)
		}
		return s
	}
	want := show()
	buf := req.Detach(make([]byte, 0, 8))
	for i := range head {
		head[i] = '#'
	}
	if got := show(); got != want {
		t.Errorf("after the buffer was overwritten:\n got  %s\n want %s", got, want)
	}
	if again := req.Detach(buf); &again[0] != &buf[0] {
		t.Error("a buffer large enough was not reused")
	}
}
