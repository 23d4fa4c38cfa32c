package rawio

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestQuietOnTCP(t *testing.T) {
	s, peer := tcpPair(t)
	if !Quiet(s) {
		t.Fatal("an idle connection is not quiet")
	}
	if !Quiet(peer) { // a *net.TCPConn itself, not wrapped
		t.Fatal("the idle peer is not quiet")
	}
	peer.Write([]byte("x"))
	waitFor(t, "the byte to arrive", func() bool { return !Quiet(s) })
	// The peek consumed nothing.
	s.SetReadDeadline(time.Now().Add(ioTimeout))
	buf := make([]byte, 4)
	if n, err := s.Read(buf); n != 1 || err != nil || buf[0] != 'x' {
		t.Fatalf("after the peek Read = %q, %v; want the byte still there", buf[:n], err)
	}
	if !Quiet(s) {
		t.Fatal("not quiet after reading what arrived")
	}
	peer.Close()
	waitFor(t, "the close to arrive", func() bool { return !Quiet(s) })
}

// TestQuietThroughTLS peeks the socket under a real TLS client connection.
func TestQuietThroughTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.StartTLS()
	defer srv.Close()
	raw, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true})
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufioReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	if !Quiet(c) {
		t.Fatal("an idle TLS connection after a complete exchange is not quiet")
	}
	srv.CloseClientConnections()
	waitFor(t, "the server's close", func() bool { return !Quiet(c) })
}

func TestQuietWithoutASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Quiet(a) {
		t.Fatal("a connection with no socket underneath must not be reported quiet")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// BenchmarkQuiet measures the look a kept connection gets before reuse.
func BenchmarkQuiet(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		if !Quiet(c) {
			b.Fatal("an idle connection is not quiet")
		}
	}
}
