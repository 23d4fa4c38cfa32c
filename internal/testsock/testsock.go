// Package testsock gives tests the two ends of a Unix socket pair: the
// transport of the channel between relay's supervisor and a serving
// process, real, with no listener.
package testsock

import (
	"net"
	"os"
	"syscall"
	"testing"
)

// Pair returns the two ends of a Unix socket pair, closed when the test
// ends.
func Pair(t testing.TB) (a, b net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "pair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return conn(fds[0]), conn(fds[1])
}
