package h1

import (
	"slices"
	"testing"
)

func TestParseResponseStatusLine(t *testing.T) {
	tests := []struct {
		name   string
		line   string
		minor  int
		status int
		reason string
		want   error
	}{
		{name: "OK", line: "HTTP/1.1 200 OK", minor: 1, status: 200, reason: "OK"},
		{name: "HTTP/1.0", line: "HTTP/1.0 404 Not Found", minor: 0, status: 404, reason: "Not Found"},
		{name: "empty reason", line: "HTTP/1.1 204 ", minor: 1, status: 204},
		{name: "no reason and no space", line: "HTTP/1.1 503", minor: 1, status: 503},
		{name: "reason with tab and obs-text", line: "HTTP/1.1 200 Tr\xe8s\tbien", minor: 1, status: 200, reason: "Tr\xe8s\tbien"},
		{name: "reason with spaces", line: "HTTP/1.1 500  Internal  Error ", minor: 1, status: 500, reason: " Internal  Error "},
		{name: "unregistered code", line: "HTTP/1.1 599 Whatever", minor: 1, status: 599, reason: "Whatever"},
		{name: "continue", line: "HTTP/1.1 100 Continue", minor: 1, status: 100, reason: "Continue"},
		{name: "code below 100", line: "HTTP/1.1 099 Low", want: ErrStatusLine},
		{name: "two-digit code", line: "HTTP/1.1 20 OK", want: ErrStatusLine},
		{name: "four-digit code", line: "HTTP/1.1 2000 OK", want: ErrStatusLine},
		{name: "letters in code", line: "HTTP/1.1 2x0 OK", want: ErrStatusLine},
		{name: "no space after code", line: "HTTP/1.1 200OK", want: ErrStatusLine},
		{name: "two spaces before code", line: "HTTP/1.1  200 OK", want: ErrStatusLine},
		{name: "HTTP/2", line: "HTTP/2 200 OK", want: ErrStatusLine},
		{name: "HTTP/1.2", line: "HTTP/1.2 200 OK", want: ErrStatusLine},
		{name: "lower-case version", line: "http/1.1 200 OK", want: ErrStatusLine},
		{name: "ICY", line: "ICY 200 OK", want: ErrStatusLine},
		{name: "empty", line: "", want: ErrStatusLine},
		{name: "NUL in reason", line: "HTTP/1.1 200 O\x00K", want: ErrRequestLine},
		{name: "bare CR in reason", line: "HTTP/1.1 200 O\rK", want: ErrBareCR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp Response
			err := ParseResponse([]byte(tt.line+"\r\nContent-Length: 0\r\n\r\n"), &resp, false)
			if tt.want != nil {
				status := 502
				if tt.want != ErrStatusLine {
					status = 400
				}
				checkErr(t, err, tt.want, status)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Minor != tt.minor || resp.Status != tt.status || string(resp.Reason) != tt.reason {
				t.Errorf("got %d %d %q, want %d %d %q", resp.Minor, resp.Status, resp.Reason, tt.minor, tt.status, tt.reason)
			}
		})
	}
}

func TestParseResponseBody(t *testing.T) {
	tests := []struct {
		name   string
		head   string
		isHead bool // answers a HEAD request
		kind   BodyKind
		length int64
		close  bool
		want   error
		status int
	}{
		{name: "length", head: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", kind: BodyLength, length: 10},
		{name: "zero length", head: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", kind: BodyNone, length: 0},
		{name: "chunked", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", kind: BodyChunked, length: -1},
		{name: "close-delimited", head: "HTTP/1.1 200 OK\r\n\r\n", kind: BodyClose, length: -1, close: true},
		{name: "HEAD with length", head: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", isHead: true, kind: BodyNone, length: 10},
		{name: "HEAD with chunked", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", isHead: true, kind: BodyNone, length: -1},
		{name: "HEAD without framing", head: "HTTP/1.1 200 OK\r\n\r\n", isHead: true, kind: BodyNone, length: -1},
		{name: "100 continue", head: "HTTP/1.1 100 Continue\r\n\r\n", kind: BodyNone, length: -1},
		{name: "101 switching", head: "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", kind: BodyNone, length: -1},
		{name: "103 with length", head: "HTTP/1.1 103 Early Hints\r\nContent-Length: 5\r\n\r\n", kind: BodyNone, length: 5},
		{name: "204 with length", head: "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", kind: BodyNone, length: 5},
		{name: "204 with chunked", head: "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n", kind: BodyNone, length: -1},
		{name: "304 with length", head: "HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n\r\n", kind: BodyNone, length: 1234},
		{name: "304 without framing keeps the connection", head: "HTTP/1.1 304 Not Modified\r\n\r\n", kind: BodyNone, length: -1},
		{name: "404 with length", head: "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\n", kind: BodyLength, length: 9},
		{name: "identical lengths", head: "HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\n", kind: BodyLength, length: 3},
		{name: "HTTP/1.1 close", head: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", kind: BodyLength, length: 1, close: true},
		{name: "HTTP/1.0 closes by default", head: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", kind: BodyLength, length: 1, close: true},
		{name: "HTTP/1.0 keep-alive", head: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n", kind: BodyLength, length: 1},
		{name: "HTTP/1.0 keep-alive without length still closes", head: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", kind: BodyClose, length: -1, close: true},
		{name: "HTTP/1.0 chunked is faulty framing", head: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n", kind: BodyChunked, length: -1, close: true},

		{name: "length and chunked", head: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", want: ErrLengthAndEncoding, status: 400},
		{name: "length and chunked on HEAD", head: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", isHead: true, want: ErrLengthAndEncoding, status: 400},
		{name: "differing lengths", head: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", want: ErrConflictingLength, status: 400},
		{name: "bad length", head: "HTTP/1.1 200 OK\r\nContent-Length: three\r\n\r\n", want: ErrContentLength, status: 400},
		{name: "gzip only", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", want: ErrTransferEncoding, status: 400},
		{name: "gzip then chunked", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", want: ErrUnknownEncoding, status: 501},
		{name: "obs-fold", head: "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0\r\n\r\n", want: ErrObsFold, status: 400},
		{name: "space before colon", head: "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", want: ErrWhitespaceColon, status: 400},
		{name: "bare LF", head: "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", want: ErrBareLF, status: 400},
		{name: "too many fields", head: "HTTP/1.1 200 OK\r\n" + manyFields(maxFields+1) + "\r\n", want: ErrTooManyFields, status: 431},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp Response
			err := ParseResponse([]byte(tt.head), &resp, tt.isHead)
			if tt.want != nil {
				checkErr(t, err, tt.want, tt.status)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Body != tt.kind || resp.ContentLength != tt.length || resp.Close != tt.close {
				t.Errorf("body %d length %d close %v, want %d %d %v",
					resp.Body, resp.ContentLength, resp.Close, tt.kind, tt.length, tt.close)
			}
		})
	}
}

func TestParseResponseHop(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\n" +
		"Connection: keep-alive, X-Internal\r\n" +
		"Keep-Alive: timeout=5\r\n" +
		"Transfer-Encoding: chunked\r\n" +
		"Trailer: X-Sum\r\n" +
		"Proxy-Authenticate: Basic\r\n" +
		"X-Internal: secret\r\n" +
		"Content-Type: text/plain\r\n" +
		"Set-Cookie: a=1\r\n" +
		"Set-Cookie: b=2\r\n\r\n"
	var resp Response
	if err := ParseResponse([]byte(head), &resp, false); err != nil {
		t.Fatal(err)
	}
	if got, want := fieldNames(resp.Fields, true), []string{"Connection", "Keep-Alive", "Transfer-Encoding", "Trailer", "Proxy-Authenticate", "X-Internal"}; !slices.Equal(got, want) {
		t.Errorf("hop = %q, want %q", got, want)
	}
	if got, want := fieldNames(resp.Fields, false), []string{"Content-Type", "Set-Cookie", "Set-Cookie"}; !slices.Equal(got, want) {
		t.Errorf("forwarded = %q, want %q", got, want)
	}
}
