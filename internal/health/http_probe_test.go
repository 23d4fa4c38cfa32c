package health

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"relay/internal/backend"
)

func TestParseStatusLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		code int // 0: malformed
	}{
		{name: "HTTP/1.1 with reason", line: "HTTP/1.1 200 OK", code: 200},
		{name: "HTTP/1.0", line: "HTTP/1.0 204 No Content", code: 204},
		{name: "no reason", line: "HTTP/1.1 503", code: 503},
		{name: "empty reason after a space", line: "HTTP/1.1 302 ", code: 302},
		{name: "interim", line: "HTTP/1.1 100 Continue", code: 100},
		{name: "lower-case protocol", line: "http/1.1 200 OK"},
		{name: "HTTP/2", line: "HTTP/2 200 OK"},
		{name: "version letter", line: "HTTP/1.x 200 OK"},
		{name: "two spaces", line: "HTTP/1.1  200 OK"},
		{name: "two digits", line: "HTTP/1.1 20 OK"},
		{name: "four digits", line: "HTTP/1.1 2000 OK"},
		{name: "letters", line: "HTTP/1.1 2x0 OK"},
		{name: "below 100", line: "HTTP/1.1 099 Odd"},
		{name: "another protocol", line: "SSH-2.0-OpenSSH_9.6"},
		{name: "empty", line: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, ok := parseStatusLine([]byte(tt.line))
			if ok != (tt.code != 0) || code != tt.code && ok {
				t.Errorf("parseStatusLine(%q) = %d, %v; want %d", tt.line, code, ok, tt.code)
			}
		})
	}
}

// TestHTTPProbeWire answers probes with hand-written bytes over real TCP, for
// the shapes of response net/http would smooth over.
func TestHTTPProbeWire(t *testing.T) {
	tests := []struct {
		name   string
		answer string // written after the request head; then the connection closes
		errHas string // empty: the probe passes
	}{
		{name: "interim responses are skipped", answer: "HTTP/1.1 100 Continue\r\n\r\n" +
			"HTTP/1.1 103 Early Hints\r\nLink: </" + strings.Repeat("a", 2*readBufSize) + ".css>; rel=preload\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
		{name: "a 5xx after an interim response fails", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Oops\r\n\r\n",
			errHas: "status 500 Oops"},
		{name: "too many interim responses", answer: strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", maxInterim+1) +
			"HTTP/1.1 200 OK\r\n\r\n", errHas: "interim responses"},
		{name: "101 is final and fails", answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", errHas: "status 101"},
		{name: "HTTP/1.0 passes", answer: "HTTP/1.0 200 OK\r\n\r\nok\n"},
		{name: "bare line feeds pass", answer: "HTTP/1.1 204 No Content\n\n"},
		{name: "no reason phrase passes", answer: "HTTP/1.1 200\r\n\r\n"},
		{name: "a head cut short fails", answer: "HTTP/1.1 200 OK\r\n", errHas: "reading header: unexpected EOF"},
		{name: "a body of its Content-Length passes", answer: "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"},
		{name: "a body shorter than its Content-Length fails", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
			errHas: "reading body: unexpected EOF"},
		{name: "equal Content-Lengths pass", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"},
		{name: "conflicting Content-Lengths fail", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
			errHas: "reading header: conflicting Content-Length values 2 and 3"},
		{name: "a malformed Content-Length fails", answer: "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nok",
			errHas: `malformed Content-Length "1x"`},
		{name: "Transfer-Encoding wins over Content-Length",
			answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"},
		{name: "a chunked body with extensions and trailers passes",
			answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n2;x=y\r\nok\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n"},
		{name: "a malformed chunk size fails", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
			errHas: `reading body: malformed chunk size line "zz"`},
		{name: "chunk data longer than its size fails",
			answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokk\r\n0\r\n\r\n",
			errHas: "chunk data longer than its size"},
		{name: "a chunked body cut short fails", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n",
			errHas: "reading body: unexpected EOF"},
		{name: "a long header line is skipped", answer: "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("a", 2*readBufSize) +
			"\r\nContent-Length: 2\r\n\r\nok"},
		{name: "a long framing header fails", answer: "HTTP/1.1 200 OK\r\nContent-Length: " + strings.Repeat("0", readBufSize) +
			"2\r\n\r\nok", errHas: "longer than 512 bytes"},
		{name: "a folded header line is skipped", answer: "HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\nContent-Length: 0\r\n\r\n"},
		{name: "a header line without a colon is skipped", answer: "HTTP/1.1 200 OK\r\nnonsense\r\n\r\n"},
		{name: "a space before the colon is skipped", answer: "HTTP/1.1 200 OK\r\nX-A : b\r\nContent-Length: 0\r\n\r\n"},
		{name: "a long chunk extension and trailer pass", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"2;ext=" + strings.Repeat("e", 2*readBufSize) + "\r\nok\r\n0\r\nX-T: " + strings.Repeat("t", 2*readBufSize) + "\r\n\r\n"},
		{name: "the status text is reported", answer: "HTTP/1.1 503 Service Unavailable\r\n\r\n",
			errHas: "status 503 Service Unavailable"},
		{name: "another protocol fails", answer: "SSH-2.0-OpenSSH_9.6\r\n", errHas: `malformed status line "SSH-2.0-OpenSSH_9.6"`},
		{name: "an endless status line fails", answer: "HTTP/1.1 200 " + strings.Repeat("x", readBufSize), errHas: "line too long"},
		{name: "closing without an answer fails", answer: "", errHas: "reading status line: unexpected EOF"},
		{name: "closing inside the status line fails", answer: "HTTP/1.1 20", errHas: "unexpected EOF"},
		{name: "closing inside an interim head fails", answer: "HTTP/1.1 100 Continue\r\nX: y\r\n", errHas: "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := serveRaw(t, func(c net.Conn, _ []byte) { io.WriteString(c, tt.answer) })
			b := newBackend(t, "http://"+addr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := newHTTPCheck(b, "/health", false, newReadBufs()).probe(ctx)
			if tt.errHas == "" {
				if err != nil {
					t.Fatalf("probe failed: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("probe passed")
			}
			for _, want := range []string{"health check GET http://" + addr + "/health: ", tt.errHas} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// TestHTTPProbeRequestBytes checks the request on the wire, byte for byte.
func TestHTTPProbeRequestBytes(t *testing.T) {
	got := make(chan []byte, 1)
	addr := serveRaw(t, func(c net.Conn, head []byte) {
		got <- head
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
	})
	u, _ := url.Parse("http://[::1]:9000")
	b := &backend.Backend{URL: u, Name: "http://[::1]:9000", Addr: addr, Weight: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := newHTTPCheck(b, "/status?full=1", false, newReadBufs()).probe(ctx); err != nil {
		t.Fatal(err)
	}
	want := "GET /status?full=1 HTTP/1.1\r\nHost: [::1]:9000\r\nUser-Agent: relay-health-check\r\nConnection: close\r\n\r\n"
	if g := string(<-got); g != want {
		t.Errorf("request\n%q\nwant\n%q", g, want)
	}
}

// TestHTTPProbeStopsWhenCancelled cancels a probe whose backend never answers,
// long before its deadline, as Stop does.
func TestHTTPProbeStopsWhenCancelled(t *testing.T) {
	answered := make(chan struct{})
	t.Cleanup(func() { close(answered) })
	heads := make(chan struct{}, 1)
	addr := serveRaw(t, func(net.Conn, []byte) {
		heads <- struct{}{}
		<-answered
	})
	b := newBackend(t, "http://"+addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- newHTTPCheck(b, "/health", false, newReadBufs()).probe(ctx) }()
	<-heads
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("cancelled probe returned %v, want a cancellation error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled probe did not return")
	}
}

// TestHTTPSProbeSpeaksTLS checks that an https backend gets a TLS handshake
// with certificate verification: the test server's certificate is
// self-signed, so the probe must fail on it, naming the step.
func TestHTTPSProbeSpeaksTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	b := newBackend(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := newHTTPCheck(b, "/health", false, newReadBufs()).probe(ctx)
	if err == nil {
		t.Fatal("probe passed against an untrusted certificate")
	}
	for _, want := range []string{"health check GET https://", "TLS handshake", "certificate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// serveRaw accepts connections on 127.0.0.1 and, on each, reads the request
// head, calls answer with it and closes. It stops with the test.
func serveRaw(t *testing.T, answer func(c net.Conn, head []byte)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				if head := readHead(c); head != nil {
					answer(c, head)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// readHead reads up to and including the blank line that ends a request
// head, or returns nil if the connection ends first.
func readHead(c net.Conn) []byte {
	var head []byte
	buf := make([]byte, 256)
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		n, err := c.Read(buf)
		head = append(head, buf[:n]...)
		if err != nil {
			return nil
		}
	}
	return head
}
