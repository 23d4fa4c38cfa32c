package h2

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"

	"relay/internal/backend"
)

// echoBackend answers with the length of the body it got and the body.
func echoBackend(t *testing.T, reached *atomic.Int32) *front {
	b := newBackend(t, "echo", func(w http.ResponseWriter, r *http.Request) {
		if reached != nil {
			reached.Add(1)
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		fmt.Fprintf(w, "%d %s", len(body), body)
	})
	return startFront(t, b)
}

// A body that is not the length its content-length declares is
// malformed (RFC 9113 8.1.1): the stream is reset with PROTOCOL_ERROR,
// and the connection goes on.
func TestContentLengthMismatchResetsTheStream(t *testing.T) {
	f := echoBackend(t, nil)
	rc := dialRaw(t, f.addr)
	post := func(id uint32, length string, end bool) {
		rc.writeHeaders(id, end, request("POST", "/", "content-length", length)...)
	}
	cases := []struct {
		name string
		send func(id uint32)
	}{
		{"shorter", func(id uint32) { post(id, "10", false); rc.fr.WriteData(id, true, []byte("short")) }},
		{"longer", func(id uint32) { post(id, "3", false); rc.fr.WriteData(id, true, []byte("longer")) }},
		{"longer over two frames", func(id uint32) {
			post(id, "6", false)
			rc.fr.WriteData(id, false, []byte("four"))
			rc.fr.WriteData(id, true, []byte("more"))
		}},
		{"declared with no body", func(id uint32) { post(id, "5", true) }},
	}
	id := uint32(1)
	for _, tc := range cases {
		tc.send(id)
		r := rc.response(id)
		if !r.reset || r.code != http2.ErrCodeProtocol || r.status != 0 {
			t.Errorf("%s: status %d, reset %v (%v), body %q; want RST_STREAM PROTOCOL_ERROR and no response",
				tc.name, r.status, r.reset, r.code, r.body)
		}
		id += 2
	}
	post(id, "5", false)
	rc.fr.WriteData(id, true, []byte("exact"))
	if r := rc.response(id); r.status != 200 || string(r.body) != "5 exact" {
		t.Errorf("the right length after the wrong ones: status %d, body %q", r.status, r.body)
	}
}

// A request whose header list is larger than MaxHeaderBytes is answered
// 431 by relay without reaching a backend, and the connection's header
// compression stays in step: the next request is served.
func TestHeaderListOverTheLimitGets431(t *testing.T) {
	var reached atomic.Int32
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		io.WriteString(w, r.Header.Get("X-Small"))
	})
	lim := testLimits()
	lim.MaxHeaderBytes = 4096
	f := startFrontWith(t, testBodyTime, lim, b)
	want431 := "Request Header Fields Too Large: request header fields too large\n"

	t.Run("many fields", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		var extra []string
		for i := range 8 {
			extra = append(extra, fmt.Sprintf("x-big-%d", i), strings.Repeat("b", 1000))
		}
		rc.get(1, "/", append(extra, "x-small", "first")...)
		r := rc.response(1)
		if r.status != 431 || string(r.body) != want431 {
			t.Errorf("status %d, body %q; want 431 %q", r.status, r.body, want431)
		}
		if v := rc.settings[http2.SettingMaxHeaderListSize]; v != 4096 {
			t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE %d, want 4096", v)
		}
		// The same small fields again, now from the dynamic table.
		rc.get(3, "/", "x-small", "second")
		if r := rc.response(3); r.status != 200 || string(r.body) != "second" {
			t.Errorf("the next request: status %d, body %q; want 200 second", r.status, r.body)
		}
	})

	// The answer to a HEAD request has no content, 431 included.
	t.Run("HEAD", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		var extra []string
		for i := range 8 {
			extra = append(extra, fmt.Sprintf("x-big-%d", i), strings.Repeat("b", 1000))
		}
		rc.writeHeaders(1, true, request("HEAD", "/", extra...)...)
		r := rc.response(1)
		if r.status != 431 {
			t.Fatalf("status %d, want 431", r.status)
		}
		if len(r.body) != 0 || !slices.Equal(r.frames, []http2.FrameType{http2.FrameHeaders}) {
			t.Errorf("frames %v, body %q; want one HEADERS ending the stream and no DATA", r.frames, r.body)
		}
	})

	// One field longer than the whole limit is a header list over the
	// limit too.
	t.Run("one long field", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		rc.get(1, "/", "x-big", strings.Repeat("b", 5000))
		fr, err := rc.read()
		for err == nil {
			if _, ok := fr.(*http2.MetaHeadersFrame); ok || fr.Header().Type == http2.FrameGoAway ||
				fr.Header().Type == http2.FrameRSTStream {
				break
			}
			fr, err = rc.read()
		}
		switch f := fr.(type) {
		case *http2.MetaHeadersFrame:
			if s := f.PseudoValue("status"); s != "431" {
				t.Errorf("status %s, want 431", s)
			}
		case *http2.GoAwayFrame:
			t.Errorf("GOAWAY %v: the connection was closed instead of the request answered 431", f.ErrCode)
		case *http2.RSTStreamFrame:
			t.Errorf("RST_STREAM %v instead of 431", f.ErrCode)
		default:
			t.Errorf("no answer: %v", err)
		}
	})
	if n := reached.Load(); n != 1 {
		t.Errorf("%d requests reached the backend, want only the one within the limit", n)
	}
}

// Expect: 100-continue gets a 100 before the final response when relay
// needs the body; when relay answers without it, the final response
// comes at once and the body still coming is refused with RST_STREAM
// NO_ERROR.
func TestExpectContinue(t *testing.T) {
	var reached atomic.Int32
	b := newBackend(t, "echo", func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %s", len(body), body)
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	expect := request("POST", "/", "content-length", "5", "expect", "100-continue")

	rc.writeHeaders(1, false, expect...)
	var first *http2.MetaHeadersFrame
	for first == nil {
		fr := rc.next()
		if h, ok := fr.(*http2.MetaHeadersFrame); ok && h.StreamID == 1 {
			first = h
		}
		if r, ok := fr.(*http2.RSTStreamFrame); ok && r.StreamID == 1 {
			t.Fatalf("stream reset (%v) before any answer", r.ErrCode)
		}
	}
	if s := first.PseudoValue("status"); s != "100" || first.StreamEnded() {
		t.Fatalf("first answer %s (ends stream: %v), want 100", s, first.StreamEnded())
	}
	rc.fr.WriteData(1, true, []byte("hello"))
	if r := rc.response(1); r.status != 200 || string(r.body) != "5 hello" {
		t.Errorf("after 100: status %d, body %q; want 200 and the body", r.status, r.body)
	}

	b.SetDisabled(true)
	rc.writeHeaders(3, false, expect...)
	r := rc.response(3)
	if len(r.interim) != 0 || r.status != 503 || !r.ended {
		t.Fatalf("no backend: interim %v, status %d, ended %v; want 503 and no 100", r.interim, r.status, r.ended)
	}
	for {
		fr := rc.next()
		if rst, ok := fr.(*http2.RSTStreamFrame); ok && rst.StreamID == 3 {
			if rst.ErrCode != http2.ErrCodeNo {
				t.Errorf("the unsent body refused with %v, want NO_ERROR", rst.ErrCode)
			}
			break
		}
	}
	if n := reached.Load(); n != 1 {
		t.Errorf("%d requests reached the backend, want 1", n)
	}
}

// A trailer section ends the request body: the backend gets the body,
// the stream closes both ways with no reset, and a body shorter than its
// content-length is still malformed when trailers end it.
func TestTrailersEndTheRequestBody(t *testing.T) {
	f := echoBackend(t, nil)
	rc := dialRaw(t, f.addr)
	rc.writeHeaders(1, false, request("POST", "/")...)
	rc.fr.WriteData(1, false, []byte("abc"))
	rc.writeHeaders(1, true, "x-checksum", "1")
	if r := rc.response(1); r.status != 200 || string(r.body) != "3 abc" || !r.ended {
		t.Fatalf("status %d, body %q, ended %v; want 200 and the body", r.status, r.body, r.ended)
	}
	for _, h := range rc.sync() {
		if h.StreamID == 1 {
			t.Errorf("a %v frame on stream 1 after both sides ended it", h.Type)
		}
	}

	rc.writeHeaders(3, false, request("POST", "/", "content-length", "5")...)
	rc.fr.WriteData(3, false, []byte("abc"))
	rc.writeHeaders(3, true, "x-checksum", "1")
	if r := rc.response(3); !r.reset || r.code != http2.ErrCodeProtocol || r.status != 0 {
		t.Errorf("3 of 5 bytes, then trailers: status %d, reset %v (%v); want RST_STREAM PROTOCOL_ERROR", r.status, r.reset, r.code)
	}
}

// Malformed requests (RFC 9113 8.3.1) are reset with PROTOCOL_ERROR
// without reaching a backend; a request relay does not serve gets its
// answer; the connection goes on.
func TestMalformedRequestsAreReset(t *testing.T) {
	var reached atomic.Int32
	f := echoBackend(t, &reached)
	rc := dialRaw(t, f.addr)
	id := uint32(1)
	for _, tc := range []struct {
		name   string
		fields []string
	}{
		{"no :method", []string{":scheme", "http", ":authority", "x", ":path", "/"}},
		{"no :path", []string{":method", "GET", ":scheme", "http", ":authority", "x"}},
		{"empty :path", request("GET", "")},
		{":status in a request", request("GET", "/", ":status", "200")},
		{"unknown pseudo-field", request("GET", "/", ":protocol", "websocket")},
		{"upper-case name", request("GET", "/", "X-Upper", "1")},
		{"conflicting content-length", request("GET", "/", "content-length", "1", "content-length", "2")},
		{"CONNECT with :path", request("CONNECT", "/")},
	} {
		rc.writeHeaders(id, true, tc.fields...)
		if r := rc.response(id); !r.reset || r.code != http2.ErrCodeProtocol {
			t.Errorf("%s: status %d, reset %v (%v); want RST_STREAM PROTOCOL_ERROR", tc.name, r.status, r.reset, r.code)
		}
		id += 2
	}
	for _, tc := range []struct {
		name   string
		fields []string
		status int
	}{
		{"relative target", request("GET", "relative"), 400},
		{"CONNECT", []string{":method", "CONNECT", ":authority", "example.com:443"}, 405},
		{"OPTIONS *", request("OPTIONS", "*"), 200}, // answered by Go's server, not its handler
	} {
		rc.writeHeaders(id, true, tc.fields...)
		if r := rc.response(id); r.status != tc.status {
			t.Errorf("%s: status %d, reset %v (%v); want %d", tc.name, r.status, r.reset, r.code, tc.status)
		}
		id += 2
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d requests reached the backend's handler, want none", n)
	}
}

// headBackend is a backend that records the head of each request as its
// bytes arrived, before any parser could refuse it, and answers each
// with 200 and no body.
func headBackend(t *testing.T) (*backend.Backend, <-chan string) {
	t.Helper()
	heads := make(chan string, 64)
	b := connBackend(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			var head strings.Builder
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if line == "\r\n" {
					break
				}
				head.WriteString(line)
			}
			select {
			case heads <- head.String():
			default:
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
				return
			}
		}
	})
	return b, heads
}

// The method, path and authority of an HTTP/2 request become the request
// line and Host that relay sends upstream over HTTP/1.1, so they must
// make a well-formed line and Host, as on relay's HTTP/1.1 door. A
// method with a space or a tab (which would add words to the line), or
// an authority with a space, a '/' or a '@', gets relay's 400 and never
// reaches the backend; a valid authority arrives as Host.
func TestRequestLineAndAuthorityAreChecked(t *testing.T) {
	b, heads := headBackend(t)
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	const (
		badMethod = "Bad Request: malformed method\n"
		badHost   = "Bad Request: malformed Host header\n"
	)
	withAuthority := func(authority string) []string {
		return []string{":method", "GET", ":scheme", "http", ":authority", authority, ":path", "/"}
	}
	id := uint32(1)
	for _, tc := range []struct {
		name   string
		fields []string
		want   string
	}{
		{"a method carrying a request line", request("GET /internal HTTP/1.1\tX:", "/"), badMethod},
		{"a method with a space", request("GET /admin", "/"), badMethod},
		{"a method with a tab", request("GE\tT", "/"), badMethod},
		{"an authority with a space", withAuthority("relay.test evil.test"), badHost},
		{"an authority with a slash", withAuthority("relay.test/evil"), badHost},
		{"an authority with userinfo", withAuthority("user@relay.test"), badHost},
		{"a host field with a space", []string{":method", "GET", ":scheme", "http", ":path", "/", "host", "relay.test evil.test"}, badHost},
	} {
		rc.writeHeaders(id, true, tc.fields...)
		if r := rc.response(id); r.status != 400 || string(r.body) != tc.want {
			t.Errorf("%s: status %d, body %q, reset %v (%v); want relay's 400 %q", tc.name, r.status, r.body, r.reset, r.code, tc.want)
		}
		id += 2
	}
	rc.writeHeaders(id, true, withAuthority("relay.test:8080")...)
	if r := rc.response(id); r.status != 200 {
		t.Fatalf("a valid request: status %d, body %q, reset %v (%v)", r.status, r.body, r.reset, r.code)
	}
	head := await(t, heads, "the valid request at the backend")
	if !strings.HasPrefix(head, "GET / HTTP/1.1\r\n") || !strings.Contains(head, "\r\nHost: relay.test:8080\r\n") {
		t.Errorf("the backend's first request head:\n%s\nwant the valid request, with Host: relay.test:8080", head)
	}
	select {
	case h := <-heads:
		t.Errorf("another request reached the backend:\n%s", h)
	default:
	}
}
