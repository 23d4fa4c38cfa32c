package proxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"relay/internal/backend"
)

// tcpPair returns the two ends of a loopback TCP connection, the first
// wrapped in a sock.
func tcpPair(t *testing.T) (*sock, net.Conn) {
	t.Helper()
	ln := listen(t)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	s := newSock(c)
	if s.raw == nil {
		t.Fatal("a TCP connection must use raw system calls")
	}
	t.Cleanup(func() { s.Close(); peer.Close() })
	return s, peer
}

func TestSockReadWrite(t *testing.T) {
	s, peer := tcpPair(t)
	s.SetDeadline(time.Now().Add(ioTimeout))
	peer.SetDeadline(time.Now().Add(ioTimeout))

	// A write larger than the socket buffers completes through the
	// poller's wait for writability while the peer drains it.
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(big))))
		got <- b
	}()
	n, err := s.Write(big)
	if err != nil || n != len(big) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(big))
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("peer received %d bytes, not the %d written", len(b), len(big))
	}

	// A read waits in the poller until bytes arrive.
	go func() {
		time.Sleep(20 * time.Millisecond)
		peer.Write([]byte("hello"))
	}()
	buf := make([]byte, 16)
	n, err = s.Read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read = %q, %v; want \"hello\"", buf[:n], err)
	}

	// The peer's close reads as io.EOF.
	peer.Close()
	if n, err = s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after peer close = %d, %v; want 0, io.EOF", n, err)
	}
}

func TestSockReadDeadline(t *testing.T) {
	s, _ := tcpPair(t)
	s.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	start := time.Now()
	_, err := s.Read(make([]byte, 8))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline = %v; want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("deadline fired after %v", d)
	}
}

func TestSockWriteToResetPeer(t *testing.T) {
	s, peer := tcpPair(t)
	// Closing with unread data makes the peer answer with a reset.
	peer.(*net.TCPConn).SetLinger(0)
	peer.Close()
	s.SetWriteDeadline(time.Now().Add(ioTimeout))
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = s.Write([]byte("data after the peer is gone\n"))
		time.Sleep(time.Millisecond)
	}
	if !isConnLoss(err) {
		t.Fatalf("Write to a reset connection = %v; want a connection loss (ECONNRESET or EPIPE)", err)
	}
}

func TestSockNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := newSock(a)
	if s.raw != nil {
		t.Fatal("net.Pipe has no descriptor; sock must fall back to its methods")
	}
	go b.Write([]byte("pipe"))
	buf := make([]byte, 8)
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "pipe" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
}

// TestIdleClientConnHoldsNoBuffer checks the wiring that lets an idle
// keep-alive client connection give its read buffer back: the h1 reader
// must see the socket under sock, or 10,000 idle clients keep 40 MB of
// buffers.
func TestIdleClientConnHoldsNoBuffer(t *testing.T) {
	p, err := New(Config{}, []*backend.Backend{newBackendFor(t, deadAddr(t), 1)})
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	cc := newClientConn(p, server)
	io.WriteString(client, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
	server.SetReadDeadline(time.Now().Add(ioTimeout))
	if err := cc.br.ReadRequest(&cc.req); err != nil {
		t.Fatal(err)
	}
	if !cc.br.HoldsBuffer() {
		t.Fatal("the reader holds no buffer right after reading a request")
	}
	// Nothing more arrives: the read that finds nothing gives the buffer
	// back before it waits, here until the deadline.
	server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if err := cc.br.ReadRequest(&cc.req); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("reading an idle connection: %v, want the deadline", err)
	}
	if cc.br.HoldsBuffer() {
		t.Error("an idle client connection still holds its read buffer")
	}
}
