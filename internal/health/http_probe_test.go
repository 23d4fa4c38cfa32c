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

// TestHTTPProbeWire answers probes with hand-written bytes over real TCP, for
// the shapes of response net/http would smooth over.
func TestHTTPProbeWire(t *testing.T) {
	tests := []struct {
		name   string
		answer string // written after the request head; then the connection closes
		errHas string // empty: the probe passes
	}{
		{name: "interim responses are skipped", answer: "HTTP/1.1 100 Continue\r\n\r\n" +
			"HTTP/1.1 103 Early Hints\r\nLink: </" + strings.Repeat("a", 2*headBufSize) + ".css>; rel=preload\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"},
		{name: "a 5xx after an interim response fails", answer: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Oops\r\n\r\n",
			errHas: "status 500 Oops"},
		{name: "too many interim responses", answer: strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", maxInterim+1) +
			"HTTP/1.1 200 OK\r\n\r\n", errHas: "interim responses"},
		{name: "101 is final and fails", answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", errHas: "status 101"},
		{name: "HTTP/1.0 passes", answer: "HTTP/1.0 200 OK\r\n\r\nok\n"},
		{name: "no reason phrase passes", answer: "HTTP/1.1 200\r\n\r\n"},
		{name: "a head cut short fails", answer: "HTTP/1.1 200 OK\r\n", errHas: "reading response head: h1: connection closed inside a message"},
		{name: "a body of its Content-Length passes", answer: "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"},
		{name: "a body shorter than its Content-Length fails", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
			errHas: "reading body: h1: connection closed inside a message"},
		{name: "equal Content-Lengths pass", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"},
		{name: "a chunked body with extensions and trailers passes",
			answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=y\r\nok\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n"},
		{name: "a long header line passes", answer: "HTTP/1.1 200 OK\r\nX-Long: " + strings.Repeat("a", 4*headBufSize) +
			"\r\nContent-Length: 2\r\n\r\nok"},
		{name: "the status text is reported", answer: "HTTP/1.1 503 Service Unavailable\r\n\r\n",
			errHas: "status 503 Service Unavailable"},
		{name: "closing without an answer fails", answer: "", errHas: "reading response head: unexpected EOF"},
		{name: "closing inside the status line fails", answer: "HTTP/1.1 20", errHas: "connection closed inside a message"},
		{name: "closing inside an interim head fails", answer: "HTTP/1.1 100 Continue\r\nX: y\r\n", errHas: "connection closed inside a message"},
		{name: "a body beyond maxDrain passes", answer: "HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat("x", maxDrain)},

		// What relay's data path refuses, a probe refuses too: a backend
		// answering like this would fail every proxied request while a
		// lenient probe kept it in rotation.
		{name: "bare line feeds fail", answer: "HTTP/1.1 204 No Content\n\n", errHas: "bare LF"},
		{name: "conflicting Content-Lengths fail", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
			errHas: "reading response head: h1: conflicting Content-Length values"},
		{name: "a malformed Content-Length fails", answer: "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nok",
			errHas: "malformed Content-Length"},
		{name: "Transfer-Encoding beside Content-Length fails",
			answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
			errHas: "both Content-Length and Transfer-Encoding"},
		{name: "a coding after chunked fails", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
			errHas: "Transfer-Encoding"},
		{name: "a malformed chunk size fails", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
			errHas: "reading body: h1: malformed chunk size"},
		{name: "chunk data longer than its size fails",
			answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokk\r\n0\r\n\r\n",
			errHas: "chunk data not followed by CRLF"},
		{name: "a chunked body cut short fails", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n",
			errHas: "reading body: h1: connection closed inside a message"},
		{name: "a folded header line fails", answer: "HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\nContent-Length: 0\r\n\r\n",
			errHas: "obsolete line folding"},
		{name: "a header line without a colon fails", answer: "HTTP/1.1 200 OK\r\nnonsense\r\n\r\n", errHas: "reading response head: h1:"},
		{name: "a space before the colon fails", answer: "HTTP/1.1 200 OK\r\nX-A : b\r\nContent-Length: 0\r\n\r\n",
			errHas: "whitespace before header colon"},
		{name: "another protocol fails", answer: "SSH-2.0-OpenSSH_9.6\r\n\r\n", errHas: "malformed status line"},
		{name: "an endless head fails", answer: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("x", maxHead), errHas: "message head too large"},
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
	b := &backend.Backend{Host: &backend.Host{URL: u, Name: "http://[::1]:9000", Addr: addr}, Weight: 1}
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
