package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

const ioTimeout = 10 * time.Second

// tcpPair returns the two ends of a loopback TCP connection, the first
// wrapped in a Conn.
func tcpPair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
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
	s := NewConn(c)
	if !s.Raw() {
		t.Fatal("a TCP connection must use raw system calls")
	}
	t.Cleanup(func() { s.Close(); peer.Close() })
	return s, peer
}

func TestConnReadWrite(t *testing.T) {
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

func TestConnReadDeadline(t *testing.T) {
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

func TestConnWriteToResetPeer(t *testing.T) {
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
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("Write to a reset connection = %v; want a connection loss (ECONNRESET or EPIPE)", err)
	}
}

func TestConnNotASocket(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := NewConn(a)
	if s.Raw() {
		t.Fatal("net.Pipe has no descriptor; Conn must fall back to its methods")
	}
	go b.Write([]byte("pipe"))
	buf := make([]byte, 8)
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "pipe" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
}

// TestConnWriteThenRead sends a request and reads the answer in one call,
// over a socket and over a connection that is not one.
func TestConnWriteThenRead(t *testing.T) {
	s, peer := tcpPair(t)
	pipeA, pipeB := net.Pipe()
	t.Cleanup(func() { pipeA.Close(); pipeB.Close() })
	for _, tt := range []struct {
		name string
		c    *Conn
		peer net.Conn
	}{
		{"socket", s, peer},
		{"pipe", NewConn(pipeA), pipeB},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.c.SetDeadline(time.Now().Add(ioTimeout))
			tt.peer.SetDeadline(time.Now().Add(ioTimeout))
			go func() {
				buf := make([]byte, 4)
				if _, err := io.ReadFull(tt.peer, buf); err == nil && string(buf) == "ping" {
					tt.peer.Write([]byte("pong"))
				}
			}()
			buf := make([]byte, 16)
			n, err := tt.c.WriteThenRead([]byte("ping"), buf)
			if err != nil || string(buf[:n]) != "pong" {
				t.Fatalf("WriteThenRead = %q, %v; want \"pong\"", buf[:n], err)
			}
		})
	}
}

// A read deadline that passed before WriteThenRead is called times the
// read out, but the request still goes out: a caller that waits on for
// the answer (relay looks whether its client is there, then reads again)
// must get one.
func TestConnWriteThenReadWithAPassedDeadlineStillWrites(t *testing.T) {
	s, peer := tcpPair(t)
	s.SetReadDeadline(time.Now().Add(-time.Second))
	peer.SetDeadline(time.Now().Add(ioTimeout))
	buf := make([]byte, 16)
	if _, err := s.WriteThenRead([]byte("ping"), buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WriteThenRead with a passed deadline: %v, want a timeout", err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != "ping" {
		t.Fatalf("peer read %q, %v; want the request", got, err)
	}
	peer.Write([]byte("pong"))
	s.SetReadDeadline(time.Now().Add(ioTimeout))
	if n, err := s.Read(buf); err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("reading on: %q, %v", buf[:n], err)
	}
}

// TestConnWriteThenReadLargeRequest writes a request larger than the
// socket buffers: the rest goes out through the poller before the read.
func TestConnWriteThenReadLargeRequest(t *testing.T) {
	s, peer := tcpPair(t)
	s.SetDeadline(time.Now().Add(ioTimeout))
	peer.SetDeadline(time.Now().Add(ioTimeout))
	big := bytes.Repeat([]byte("x"), 8<<20)
	go func() {
		if n, err := io.CopyN(io.Discard, peer, int64(len(big))); err == nil && n == int64(len(big)) {
			peer.Write([]byte("done"))
		}
	}()
	buf := make([]byte, 16)
	n, err := s.WriteThenRead(big, buf)
	if err != nil || string(buf[:n]) != "done" {
		t.Fatalf("WriteThenRead of 8 MiB = %q, %v; want \"done\"", buf[:n], err)
	}
}

// lender counts how often its buffer is handed out and given back.
type lender struct {
	buf            []byte
	borrows, backs int
}

func (l *lender) Borrow() []byte {
	if l.buf == nil {
		l.buf = make([]byte, 16)
		l.borrows++
	}
	return l.buf
}

func (l *lender) GiveBack() { l.buf = nil; l.backs++ }

// TestConnReadLentGivesBufferBackWhileWaiting checks the promise idle
// connections rely on: while nothing has arrived, the buffer is returned.
func TestConnReadLentGivesBufferBackWhileWaiting(t *testing.T) {
	s, peer := tcpPair(t)
	s.SetDeadline(time.Now().Add(ioTimeout))
	go func() {
		time.Sleep(20 * time.Millisecond)
		peer.Write([]byte("late"))
	}()
	l := &lender{}
	n, err := s.ReadLent(l)
	if err != nil || string(l.buf[:n]) != "late" {
		t.Fatalf("ReadLent = %d, %v", n, err)
	}
	if l.backs == 0 || l.borrows < 2 {
		t.Fatalf("buffer borrowed %d and given back %d times; want it given back while waiting and borrowed again", l.borrows, l.backs)
	}
	// Bytes already there: no wait, nothing given back.
	peer.Write([]byte("now"))
	time.Sleep(20 * time.Millisecond)
	backs := l.backs
	if n, err := s.ReadLent(l); err != nil || string(l.buf[:n]) != "now" {
		t.Fatalf("ReadLent = %q, %v", l.buf[:n], err)
	}
	if l.backs != backs {
		t.Fatal("the buffer was given back although bytes were waiting")
	}
	peer.Close()
	if n, err := s.ReadLent(l); n != 0 || err != io.EOF {
		t.Fatalf("ReadLent after close = %d, %v; want 0, io.EOF", n, err)
	}
}

// WriteWait bounds a write the peer does not take, and never extends a
// write deadline the caller set: the earlier of the two ends the write,
// and the caller's deadline is in force again afterwards.
func TestWriteWaitAndTheCallersDeadline(t *testing.T) {
	for _, c := range []struct {
		name         string
		wait, caller time.Duration
		want         time.Duration
	}{
		{"no caller deadline", 300 * time.Millisecond, 0, 300 * time.Millisecond},
		{"caller's deadline first", 3 * time.Second, 300 * time.Millisecond, 300 * time.Millisecond},
		{"WriteWait first", 300 * time.Millisecond, 3 * time.Second, 300 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := tcpPair(t) // the peer never reads
			s.WriteWait = c.wait
			if c.caller > 0 {
				s.SetWriteDeadline(time.Now().Add(c.caller))
			}
			buf := make([]byte, 1<<20)
			start := time.Now()
			var err error
			for i := 0; i < 256 && err == nil; i++ {
				_, err = s.Write(buf)
			}
			took := time.Since(start)
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("write to a peer that reads nothing: %v after %v, want a deadline", err, took)
			}
			if took < c.want-50*time.Millisecond || took > c.want+2*time.Second {
				t.Errorf("the write failed after %v, want about %v", took.Round(time.Millisecond), c.want)
			}
			// A caller's deadline that has passed still holds.
			if c.caller > 0 && c.caller < c.wait {
				if _, err = s.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
					t.Errorf("after the write, with the caller's deadline passed: %v, want a deadline error", err)
				}
			}
		})
	}
}

// TestConnReadable looks at a socket without reading it: nothing there,
// bytes there (still there after the look), drained, the peer's end; and
// a connection that is not a socket, which it cannot look at.
func TestConnReadable(t *testing.T) {
	s, peer := tcpPair(t)
	s.SetDeadline(time.Now().Add(ioTimeout))
	if s.Readable() {
		t.Fatal("Readable before the peer sent anything")
	}
	if _, err := peer.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	waitReadable(t, s)
	if !s.Readable() {
		t.Fatal("a second look must not have consumed the bytes")
	}
	buf := make([]byte, 8)
	if n, err := s.Read(buf); err != nil || string(buf[:n]) != "ab" {
		t.Fatalf("Read after Readable = %q, %v; want the bytes the peer sent", buf[:n], err)
	}
	if s.Readable() {
		t.Fatal("Readable once everything was read")
	}
	if allocs := testing.AllocsPerRun(100, func() { s.Readable() }); allocs != 0 {
		t.Errorf("Readable allocates %.0f times, want 0", allocs)
	}
	peer.Close()
	waitReadable(t, s) // the end of the stream: a read returns at once

	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go b.Write([]byte("pipe"))
	if NewConn(a).Readable() {
		t.Fatal("a connection that is not a socket cannot be looked at: want false")
	}
}

// waitReadable waits for loopback to deliver what the peer did.
func waitReadable(t *testing.T, s *Conn) {
	t.Helper()
	for deadline := time.Now().Add(ioTimeout); !s.Readable(); {
		if time.Now().After(deadline) {
			t.Fatal("the socket never became readable")
		}
		time.Sleep(time.Millisecond)
	}
}
