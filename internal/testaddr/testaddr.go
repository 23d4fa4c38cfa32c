// Package testaddr gives tests loopback addresses with a known behaviour.
package testaddr

import (
	"fmt"
	"syscall"
	"testing"
)

// Refused returns a 127.0.0.1 address where a TCP connection is refused at
// once, for as long as the test runs. The port is held by a socket that is
// bound but not listening: a port merely found free and let go could be
// taken by another test's listener in the meantime, and the "dead"
// address would answer.
func Refused(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
