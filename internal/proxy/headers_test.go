package proxy

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
)

// recordingBackend passes every request it reads to the returned channel
// and answers each with resp.
func recordingBackend(t *testing.T, resp string) (*rawBackend, <-chan *rawRequest) {
	t.Helper()
	reqs := make(chan *rawRequest, 16)
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		for {
			req, err := rb.next(br)
			if err != nil {
				return
			}
			reqs <- req
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	})
	return rb, reqs
}

// roundTrip sends a raw request head to relay on a new connection and
// returns the request the backend received and the response head the
// client received.
func roundTrip(t *testing.T, r *testRelay, reqs <-chan *rawRequest, head string) (*rawRequest, string, map[string][]string) {
	t.Helper()
	c, br := dialRelay(t, r)
	write(t, c, head)
	status, h, err := readHead(br)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	select {
	case req := <-reqs:
		return req, status, h
	default:
		t.Fatalf("backend saw no request; relay answered %q", status)
		return nil, "", nil
	}
}

func TestForwardedHeaders(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	tests := []struct {
		name      string
		trusted   []netip.Prefix
		fields    string // extra request fields
		wantFor   string
		wantProto string
		wantHost  string
	}{
		{
			name:    "set for a plain client",
			wantFor: "127.0.0.1", wantProto: "http", wantHost: "example.test:8080",
		},
		{
			name:    "forgeries from an untrusted client are replaced",
			fields:  "X-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.test\r\n",
			wantFor: "127.0.0.1", wantProto: "http", wantHost: "example.test:8080",
		},
		{
			name:    "a trusted proxy's values are kept and appended to",
			trusted: trusted,
			fields:  "X-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: public.test\r\n",
			wantFor: "1.2.3.4, 127.0.0.1", wantProto: "https", wantHost: "public.test",
		},
		{
			name:    "several X-Forwarded-For lines from a trusted proxy join in order",
			trusted: trusted,
			fields:  "X-Forwarded-For: 1.1.1.1\r\nX-Forwarded-For: 2.2.2.2, 3.3.3.3\r\n",
			wantFor: "1.1.1.1, 2.2.2.2, 3.3.3.3, 127.0.0.1", wantProto: "http", wantHost: "example.test:8080",
		},
		{
			name:    "naming them in Connection does not remove them",
			fields:  "Connection: X-Forwarded-For, X-Forwarded-Proto, X-Forwarded-Host\r\nX-Forwarded-For: 1.2.3.4\r\n",
			wantFor: "127.0.0.1", wantProto: "http", wantHost: "example.test:8080",
		},
		{
			name:    "a trusted proxy naming them in Connection drops only its own values",
			trusted: trusted,
			fields:  "Connection: X-Forwarded-For, X-Forwarded-Proto\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Proto: https\r\n",
			wantFor: "127.0.0.1", wantProto: "http", wantHost: "example.test:8080",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb, reqs := recordingBackend(t, okResponse("ok"))
			r := startRelay(t, Config{TrustedProxies: tt.trusted}, rb.b)
			// The other address-claiming fields go with X-Forwarded-For: a
			// trusted proxy's pass on, anyone else's are dropped.
			tt.fields += "Forwarded: for=192.0.2.9\r\nX-Real-IP: 192.0.2.9\r\n"
			req, status, _ := roundTrip(t, r, reqs, "GET / HTTP/1.1\r\nHost: example.test:8080\r\n"+tt.fields+"\r\n")
			if !strings.Contains(status, " 200 ") {
				t.Fatalf("status line %q", status)
			}
			for _, f := range []struct{ name, want string }{
				{"X-Forwarded-For", tt.wantFor},
				{"X-Forwarded-Proto", tt.wantProto},
				{"X-Forwarded-Host", tt.wantHost},
			} {
				if got := req.Header[f.name]; len(got) != 1 || got[0] != f.want {
					t.Errorf("%s = %q, want exactly [%q]", f.name, got, f.want)
				}
			}
			for _, name := range []string{"Forwarded", "X-Real-Ip"} {
				got := req.Header[name]
				switch {
				case tt.trusted != nil && (len(got) != 1 || !strings.Contains(got[0], "192.0.2.9")):
					t.Errorf("%s from a trusted proxy = %q, want it passed on", name, got)
				case tt.trusted == nil && len(got) != 0:
					t.Errorf("%s from an untrusted client = %q, want it dropped", name, got)
				}
			}
		})
	}
}

func TestHopByHopFieldsAreStripped(t *testing.T) {
	resp := "HTTP/1.1 200 OK\r\n" +
		"Connection: X-Bar, keep-alive\r\n" +
		"X-Bar: secret\r\n" +
		"Keep-Alive: timeout=5\r\n" +
		"Proxy-Authenticate: Basic realm=\"x\"\r\n" +
		"Proxy-Connection: keep-alive\r\n" +
		"Trailer: X-T\r\n" +
		"Upgrade: h2c\r\n" +
		"X-Resp: kept\r\n" +
		"Set-Cookie: a=1\r\n" +
		"Set-Cookie: b=2\r\n" +
		"Content-Length: 2\r\n\r\nok"
	rb, reqs := recordingBackend(t, resp)
	r := startRelay(t, Config{}, rb.b)
	head := "GET /path?q=1 HTTP/1.1\r\n" +
		"Host: Example.TEST:8080\r\n" +
		"Connection: keep-alive, X-Foo\r\n" +
		"X-Foo: secret\r\n" +
		"Keep-Alive: timeout=5\r\n" +
		"TE: trailers\r\n" +
		"Trailer: X-T\r\n" +
		"Proxy-Authorization: Basic abc\r\n" +
		"Proxy-Connection: keep-alive\r\n" +
		"Upgrade: websocket\r\n" +
		"X-End: kept\r\n" +
		"Accept: a/b\r\n" +
		"Accept: c/d\r\n" +
		"\r\n"
	req, status, got := roundTrip(t, r, reqs, head)

	if req.Method != "GET" || req.Target != "/path?q=1" {
		t.Errorf("backend got %s %s, want GET /path?q=1", req.Method, req.Target)
	}
	if h := req.Header.Get("Host"); h != "Example.TEST:8080" {
		t.Errorf("backend got Host %q, want it unchanged", h)
	}
	for _, name := range []string{"X-Foo", "Keep-Alive", "Te", "Trailer", "Proxy-Authorization", "Proxy-Connection", "Upgrade", "Connection"} {
		if v, ok := req.Header[name]; ok {
			t.Errorf("backend got hop-by-hop field %s: %q", name, v)
		}
	}
	if v := req.Header.Get("X-End"); v != "kept" {
		t.Errorf("backend got X-End %q, want kept", v)
	}
	if v := req.Header["Accept"]; len(v) != 2 || v[0] != "a/b" || v[1] != "c/d" {
		t.Errorf("backend got Accept %q, want both lines in order", v)
	}

	if !strings.Contains(status, " 200 ") {
		t.Fatalf("status line %q", status)
	}
	for _, name := range []string{"X-Bar", "Keep-Alive", "Proxy-Authenticate", "Proxy-Connection", "Trailer", "Upgrade"} {
		if v, ok := got[name]; ok {
			t.Errorf("client got hop-by-hop field %s: %q", name, v)
		}
	}
	for _, v := range got["Connection"] {
		if strings.Contains(strings.ToLower(v), "x-bar") {
			t.Errorf("client got the backend's Connection: %q", v)
		}
	}
	if v := got["X-Resp"]; len(v) != 1 || v[0] != "kept" {
		t.Errorf("client got X-Resp %q, want kept", v)
	}
	if v := got["Set-Cookie"]; len(v) != 2 || v[0] != "a=1" || v[1] != "b=2" {
		t.Errorf("client got Set-Cookie %q, want both lines in order", v)
	}
	if v := got["Content-Length"]; len(v) != 1 || v[0] != "2" {
		t.Errorf("client got Content-Length %q, want 2", v)
	}
}

// TestAbsoluteFormTargetBecomesOriginForm: a request written for a forward
// proxy names its authority in the target, which then is the Host.
func TestAbsoluteFormTargetBecomesOriginForm(t *testing.T) {
	rb, reqs := recordingBackend(t, okResponse("ok"))
	r := startRelay(t, Config{}, rb.b)
	req, _, _ := roundTrip(t, r, reqs, "GET http://other.test:81/p?x=y HTTP/1.1\r\nHost: ignored.test\r\n\r\n")
	if req.Target != "/p?x=y" || req.Header.Get("Host") != "other.test:81" {
		t.Errorf("backend got target %q Host %q, want /p?x=y and other.test:81", req.Target, req.Header.Get("Host"))
	}
	if len(req.Header["Host"]) != 1 {
		t.Errorf("backend got Host %q, want one", req.Header["Host"])
	}
}
