//go:build linux

package rawio

import (
	"syscall"
	"testing"
)

// A non-blocking socket pair stands in for a TCP connection: the calls
// are the same read(2) and write(2).
func socketPair(t *testing.T) (a, b uintptr) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Close(fds[0])
		syscall.Close(fds[1])
	})
	return uintptr(fds[0]), uintptr(fds[1])
}

func TestReadWrite(t *testing.T) {
	a, b := socketPair(t)
	buf := make([]byte, 16)
	if n, errno := Read(b, buf); n != 0 || errno != syscall.EAGAIN {
		t.Fatalf("read of an empty socket = %d, %v; want 0, EAGAIN", n, errno)
	}
	if n, errno := Write(a, []byte("hello")); n != 5 || errno != 0 {
		t.Fatalf("write = %d, %v; want 5, no error", n, errno)
	}
	if n, errno := Read(b, buf); n != 5 || errno != 0 || string(buf[:n]) != "hello" {
		t.Fatalf("read = %d %q, %v; want 5 \"hello\"", n, buf[:n], errno)
	}
	syscall.Shutdown(int(a), syscall.SHUT_WR)
	if n, errno := Read(b, buf); n != 0 || errno != 0 {
		t.Fatalf("read at end of stream = %d, %v; want 0, no error", n, errno)
	}
}

func TestWriteUntilFull(t *testing.T) {
	a, _ := socketPair(t)
	chunk := make([]byte, 64<<10)
	total := 0
	for i := 0; ; i++ {
		n, errno := Write(a, chunk)
		total += n
		if errno == syscall.EAGAIN {
			break
		}
		if errno != 0 {
			t.Fatalf("write: %v", errno)
		}
		if i > 10000 {
			t.Fatal("the send buffer never filled")
		}
	}
	if total == 0 {
		t.Fatal("nothing was written before the buffer filled")
	}
}

func TestWriteToClosedPeer(t *testing.T) {
	a, b := socketPair(t)
	// The peer stops reading; closing it here would let the cleanup close
	// a descriptor number another test may have reused meanwhile.
	syscall.Shutdown(int(b), syscall.SHUT_RD)
	if _, errno := Write(a, []byte("x")); errno != syscall.EPIPE {
		t.Fatalf("write to a peer that stopped reading: %v, want EPIPE", errno)
	}
}
