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
func TestBackendThatStopsReadingFailsTheConnection(t *testing.T) {
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
	under.WriteWait = 200 * time.Millisecond
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
	defer nc.Close()
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

	// A request whose body is more than the sockets hold, and less than
	// the batch holds before a writer waits: its writer is done before
	// the bytes have gone.
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
	s.SetReadDeadline(time.Now().Add(8 * time.Second))
	start := time.Now()
	_, err = s.ReadHead()
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
