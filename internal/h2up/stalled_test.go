package h2up

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/rawio"
)

// TestBackendThatStopsReadingFailsTheConnection checks, over the batching
// connection relay gives its HTTP/2 backends, that a backend that stops
// taking bytes fails the stream waiting for its answer once the write has
// waited WriteWait, rather than at the stream's own deadline, and that
// the connection takes no more requests: a request given it then is
// refused (ErrRefused), for the core to send elsewhere, not failed as if
// sent.
// stalledBackend starts HTTP/2, over the batching connection relay gives
// its HTTP/2 backends with the given write wait and small socket buffers,
// with a backend that reads relay's preface and SETTINGS, grants windows
// far larger than what it will read, and then reads nothing more.
func stalledBackend(t *testing.T, writeWait time.Duration) (*Conn, net.Conn) {
	t.Helper()
	small := func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096)
		})
	}
	ln, err := (&net.ListenConfig{Control: small}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, _ := ln.Accept()
		accepted <- nc
	}()
	raw, err := (&net.Dialer{Control: small}).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	under := rawio.NewConn(raw)
	under.WriteWait = writeWait
	batch := rawio.NewBatchConn(under)
	batch.Batch()
	c, err := Start(batch, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		<-c.Done()
	})
	nc := <-accepted
	if nc == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { nc.Close() })
	// The backend reads relay's preface and SETTINGS, grants windows
	// far larger than what it will read, and then reads nothing more.
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(nc)
	pre := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(br, pre); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if f, err := fr.ReadFrame(); err != nil {
		t.Fatal(err)
	} else if _, ok := f.(*http2.SettingsFrame); !ok {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	fr.WriteWindowUpdate(0, 1<<30)
	select {
	case <-c.Settled():
	case <-time.After(10 * time.Second):
		t.Fatal("relay did not take the backend's SETTINGS")
	}
	return c, nc
}

// stalledRequest sends a request whose body is more than the sockets
// hold, and less than the batch holds before a writer waits: its writer
// is done before the bytes have gone.
func stalledRequest(t *testing.T, c *Conn) *Stream {
	t.Helper()
	s := c.Open()
	s.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := s.WriteHead(post("/"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(make([]byte, 200<<10)); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseWrite(nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBackendClosingWithBytesUnreadFailsStreamsAtOnce checks that a
// backend that ends its side of the connection while relay still has
// bytes for it fails the streams waiting on it at once, not once relay's
// close has waited for those bytes.
func TestBackendClosingWithBytesUnreadFailsStreamsAtOnce(t *testing.T) {
	c, nc := stalledBackend(t, 10*time.Second)
	s := stalledRequest(t, c)
	defer s.Close()
	nc.(*net.TCPConn).CloseWrite()
	s.SetReadDeadline(time.Now().Add(8 * time.Second))
	start := time.Now()
	_, err := s.ReadHead()
	if took := time.Since(start); err == nil || errors.Is(err, errReadTimeout) || took > 2*time.Second {
		t.Fatalf("waiting for the answer of a backend that closed its side: %v after %v, want the connection lost at once", err, took)
	}
}

func TestBackendThatStopsReadingFailsTheConnection(t *testing.T) {
	c, _ := stalledBackend(t, 200*time.Millisecond)
	s := stalledRequest(t, c)
	s.SetReadDeadline(time.Now().Add(8 * time.Second))
	start := time.Now()
	_, err := s.ReadHead()
	if err == nil || errors.Is(err, errReadTimeout) {
		t.Fatalf("waiting for the answer of a backend that stopped reading: %v after %v, want the connection lost", err, time.Since(start))
	}
	s.Close()
	if s2 := c.Open(); s2 != nil {
		s2.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := s2.WriteHead(get("/"), true); !errors.Is(err, ErrRefused) {
			t.Fatalf("a request on the connection after its write failed: %v, want ErrRefused", err)
		}
		s2.Close()
	}
}
