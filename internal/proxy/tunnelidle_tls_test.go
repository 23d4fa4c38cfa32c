package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// A tunnel through the TLS listener in which only the backend talks is
// not idle: the client side's reads time out again and again meanwhile,
// and the TLS connection must still carry what the client sends after.
func TestOneWayTunnelOverTLSOutlivesItsIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	const ticks = 8
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		if _, err := rb.next(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
		for i := range ticks {
			time.Sleep(idle / 3)
			fmt.Fprintf(c, "tick %d\n", i)
		}
		c.SetDeadline(time.Now().Add(ioTimeout))
		io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{br})
	})
	r := startTLSRelay(t, Config{TunnelIdleTimeout: idle}, rb.b)
	c := r.dial(t, "http/1.1")
	c.SetDeadline(time.Now().Add(ioTimeout))
	io.WriteString(c, "GET /feed HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	br := bufio.NewReader(c)
	if line, _, err := readHead(br); err != nil || !strings.HasPrefix(line, "HTTP/1.1 101 ") {
		t.Fatalf("status line %q (%v), want 101", line, err)
	}
	for i := range ticks {
		if got, err := br.ReadString('\n'); got != fmt.Sprintf("tick %d\n", i) {
			t.Fatalf("tick %d: got %q (%v)", i, got, err)
		}
	}
	for _, msg := range []string{"after a silence\n", strings.Repeat("y", 64<<10) + "\n"} {
		if _, err := io.WriteString(c, msg); err != nil {
			t.Fatalf("writing after %v of the backend alone talking: %v", ticks*idle/3, err)
		}
		if got, err := br.ReadString('\n'); got != msg {
			t.Fatalf("echo of %d bytes after the client's silence: got %d bytes (%v)", len(msg), len(got), err)
		}
	}
}
