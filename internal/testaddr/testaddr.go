// Package testaddr gives tests loopback addresses with a known behaviour.
package testaddr

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
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

// FreePort returns a TCP port nothing listens on, on any address, for a
// program under test that must be told its port before it starts (a
// client URL it advertises, a listen flag). It comes from below the
// kernel's ephemeral range: a port the kernel handed out for an outgoing
// connection, and let go, could be handed out again to another test's
// connection before the program binds it.
func FreePort(t testing.TB) string {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				low = n
			}
		}
	}
	for range 100 {
		port := strconv.Itoa(10000 + rand.IntN(low-10000))
		if ln, err := net.Listen("tcp", ":"+port); err == nil { // free on every address
			ln.Close()
			return port
		}
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}
