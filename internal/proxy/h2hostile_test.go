package proxy

import (
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/backend"
	"relay/internal/h2test"
)

// hostileH2 is an h2c backend written frame by frame (h2test.Hostile),
// for answers no well-behaved HTTP/2 server gives, as a member of a pool.
type hostileH2 struct {
	*h2test.Hostile
	b *backend.Backend
}

// hostileConn is one connection of a hostileH2.
type hostileConn = h2test.Conn

// startHostileH2 starts a hostile backend whose answer is called for each
// request head.
func startHostileH2(t *testing.T, answer func(hc *hostileConn, req *http2.MetaHeadersFrame)) *hostileH2 {
	t.Helper()
	h := h2test.StartHostile(t, ioTimeout, answer, nil)
	return &hostileH2{Hostile: h, b: newBackendFor(t, h.Addr, 1)}
}

// readUntilClosed reads what relay sends on c until it closes the
// connection or within seconds nothing more comes.
func readUntilClosed(c net.Conn, within time.Duration) (got string, closed bool) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		c.SetReadDeadline(time.Now().Add(within))
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			var ne net.Error
			return string(out), !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}
