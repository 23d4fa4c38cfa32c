//go:build linux

package proxy

import (
	"bufio"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// pipeFiles counts this process's open pipe descriptors.
func pipeFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "pipe:") {
			n++
		}
	}
	return n
}

// 200 WebSocket-style sessions, all open at once, each carrying bytes both
// ways: a tunnel costs its two sockets and nothing more, and once the last
// session closes the process's descriptors are back where they started
// within a second. Half the clients close their side politely, half
// abruptly.
func TestTunnelsLeaveNoDescriptorsBehind(t *testing.T) {
	const sessions = 200
	reqs := make(chan *rawRequest, sessions)
	rb := echoUpgradeBackend(t, reqs)
	r := startRelay(t, Config{}, rb.b)
	files, pipes := openFiles(t), pipeFiles(t)

	type session struct {
		c  net.Conn
		br *bufio.Reader
	}
	open := make([]session, sessions)
	for i := range open {
		c, br := dialRelay(t, r)
		write(t, c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		line, _, err := readHead(br)
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 101 ") {
			t.Fatalf("session %d: %q %v", i, line, err)
		}
		if got, err := br.ReadString('\n'); got != "hi\n" {
			t.Fatalf("session %d greeting %q %v", i, got, err)
		}
		open[i] = session{c, br}
	}
	for i, s := range open {
		msg := strings.Repeat("m", 20<<10) + "\n"
		write(t, s.c, msg)
		if got, err := s.br.ReadString('\n'); got != msg {
			t.Fatalf("session %d echo: %d bytes, %v", i, len(got), err)
		}
	}
	// Each session is three sockets in this process (client, relay's
	// client side, relay's upstream) plus the backend's: four.
	if extra, pipesNow := openFiles(t)-files, pipeFiles(t)-pipes; extra > 4*sessions || pipesNow > 0 {
		t.Errorf("with %d sessions open: %d more descriptors (want at most %d), %d of them pipes", sessions, extra, 4*sessions, pipesNow)
	}
	for i, s := range open {
		if i%2 == 0 {
			s.c.(*net.TCPConn).CloseWrite()
			expectClosed(t, s.c, s.br)
		}
		s.c.Close()
	}
	closed := time.Now()
	for {
		now, pipesNow := openFiles(t), pipeFiles(t)
		if now <= files && pipesNow <= pipes {
			t.Logf("descriptors back to %d %v after the last close", now, time.Since(closed).Round(time.Millisecond))
			break
		}
		if time.Since(closed) > time.Second {
			t.Fatalf("a second after the last close: %d descriptors (started with %d), %d pipes (started with %d)", now, files, pipesNow, pipes)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A client that vanishes with a reset ends its tunnel at once, even when
// the backend ignores the end of its input and never speaks again: relay
// closes both of the tunnel's sockets rather than wait on the backend.
func TestResetClientEndsItsTunnel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		if _, err := rb.next(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		io.Copy(io.Discard, br)
		<-release // silent, and never closes its side
	})
	r := startRelay(t, Config{}, rb.b)
	files := openFiles(t)
	c, br := dialRelay(t, r)
	write(t, c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	if line, _, err := readHead(br); err != nil || !strings.HasPrefix(line, "HTTP/1.1 101 ") {
		t.Fatalf("%q %v", line, err)
	}
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
	reset := time.Now()
	// Left open: the backend's own socket, which it holds on purpose.
	for openFiles(t) > files+1 {
		if time.Since(reset) > 2*time.Second {
			t.Fatalf("2 s after the client's reset relay holds %d descriptors more than before the tunnel; want its two closed", openFiles(t)-files-1)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("relay closed the tunnel %v after the client's reset", time.Since(reset).Round(time.Millisecond))
}
