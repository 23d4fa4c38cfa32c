package h1

import (
	"strings"
	"testing"
)

func TestAppendHead(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want string
	}{
		{"request line", AppendRequestLine([]byte("x"), []byte("GET"), []byte("/a?b")), "xGET /a?b HTTP/1.1\r\n"},
		{"status line", AppendStatusLine(nil, 404, []byte("Gone Fishing")), "HTTP/1.1 404 Gone Fishing\r\n"},
		{"status line standard reason", AppendStatusLine(nil, 502, nil), "HTTP/1.1 502 Bad Gateway\r\n"},
		{"status line unknown code", AppendStatusLine(nil, 299, nil), "HTTP/1.1 299 Status 299\r\n"},
		{"field", AppendField(nil, []byte("X-A"), []byte("b c")), "X-A: b c\r\n"},
		{"empty field", AppendField(nil, []byte("X-A"), nil), "X-A: \r\n"},
		{"field string", AppendFieldString(nil, "Connection", "close"), "Connection: close\r\n"},
		{"content length", AppendContentLength(nil, 1234567890123), "Content-Length: 1234567890123\r\n"},
		{"zero content length", AppendContentLength(nil, 0), "Content-Length: 0\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Fatalf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestAppendForwardFields(t *testing.T) {
	var req Request
	head := "GET / HTTP/1.1\r\nHost: a\r\nConnection: x-drop\r\nX-Drop: 1\r\nAccept: */*\r\nKeep-Alive: 5\r\nX-Keep:  v \r\n\r\n"
	if err := ParseRequest([]byte(head), &req); err != nil {
		t.Fatal(err)
	}
	got := string(AppendForwardFields(nil, req.Fields))
	if want := "Accept: */*\r\nX-Keep: v\r\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestStatusText(t *testing.T) {
	for _, code := range []int{100, 101, 200, 204, 301, 302, 303, 304, 307, 308, 400, 404, 405, 408, 411, 412, 413, 414, 417, 421, 425, 429, 431, 500, 501, 502, 503, 504, 505, 508} {
		if s := StatusText(code); s == "" || strings.HasPrefix(s, "Status ") {
			t.Errorf("StatusText(%d) = %q", code, s)
		}
	}
	// Every status an *Error carries must have a real reason phrase.
	for _, e := range []*Error{ErrHeadTooLarge, ErrRequestLine, ErrVersion, ErrStatusLine, ErrUnknownEncoding} {
		if s := StatusText(e.Status); strings.HasPrefix(s, "Status ") {
			t.Errorf("no reason phrase for %d (%v)", e.Status, e)
		}
	}
}
