package proxy

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"relay/internal/h1"
)

// Tunnel completes a protocol switch (WebSocket and the like): it sends the
// backend's 101 to the client and then copies bytes both ways until either
// side closes. The connection is not reused afterwards. It returns the
// bytes sent to the client.
func (cc *clientConn) Tunnel(resp *h1.Response, up net.Conn, early []byte) int64 {
	cc.keep = false
	out := h1.AppendStatusLine(cc.out[:0], 101, resp.Reason)
	out = h1.AppendForwardFields(out, resp.Fields)
	out = append(out, "Connection: Upgrade\r\n"...)
	for i := range resp.Fields {
		if resp.Fields[i].Is("upgrade") {
			out = h1.AppendField(out, upgradeField, resp.Fields[i].Value)
		}
	}
	out = append(out, '\r', '\n')
	out = append(out, early...)
	cc.out = out
	if _, err := cc.conn.Write(out); err != nil {
		return 0
	}
	if k := cc.br.Buffered(); k > 0 {
		if _, err := up.Write(cc.br.Peek()); err != nil {
			return 0
		}
		cc.br.Discard(k)
	}
	var none time.Time
	cc.conn.SetDeadline(none)
	up.SetDeadline(none)
	// The client side through rawio, as the request path writes it: a
	// client that stops taking bytes is cut off after idle_timeout
	// (WriteWait), over TLS and in cleartext alike.
	client := net.Conn(cc.conn)
	idle := newTunnelIdle(cc.p.cfg.TunnelIdleTimeout)
	sent := make(chan int64, 1)
	go func() {
		n, err := pump(client, idle.reader(up))
		endTunnel(client, up, err)
		sent <- n
	}()
	_, err := pump(up, idle.reader(client))
	endTunnel(up, client, err)
	return <-sent
}

// tunnelIdle ends a tunnel in which neither side has sent anything for
// its timeout (tunnel_idle_timeout, HAProxy's timeout tunnel): each
// direction reads under a deadline, and one whose deadline passes ends
// the tunnel unless the other direction moved meanwhile.
type tunnelIdle struct {
	timeout time.Duration // 0: never
	last    atomic.Int64  // when either side last sent bytes, Unix ns
}

func newTunnelIdle(timeout time.Duration) *tunnelIdle {
	t := &tunnelIdle{timeout: timeout}
	t.last.Store(time.Now().UnixNano())
	return t
}

// reader reads c under the tunnel's idle rule.
func (t *tunnelIdle) reader(c net.Conn) io.Reader {
	if t.timeout <= 0 {
		return c
	}
	return &idleReader{c: c, t: t}
}

// errTunnelIdle ends a tunnel idle for its timeout.
var errTunnelIdle = errors.New("tunnel idle for tunnel_idle_timeout")

// idleReader reads under a deadline set from the tunnel's last activity.
// It is moved only when it passes, not on every read: a deadline that
// passes while the tunnel moved is set again from the latest activity.
type idleReader struct {
	c     net.Conn
	t     *tunnelIdle
	armed bool
}

func (r *idleReader) Read(p []byte) (int, error) {
	if !r.armed {
		r.c.SetReadDeadline(time.Unix(0, r.t.last.Load()).Add(r.t.timeout))
		r.armed = true
	}
	for {
		n, err := r.c.Read(p)
		if n > 0 {
			r.t.last.Store(time.Now().UnixNano())
			return n, err
		}
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			last := time.Unix(0, r.t.last.Load())
			if time.Since(last) < r.t.timeout {
				// One side moved: wait on from its latest bytes.
				r.c.SetReadDeadline(last.Add(r.t.timeout))
				continue
			}
			return 0, errTunnelIdle
		}
		return n, err
	}
}

// endTunnel finishes one direction of a tunnel, from src to dst. A clean
// end of src is passed on as a half-close, so the other direction may go
// on; a failure on either side (a reset, a write to a peer that left) ends
// the whole tunnel, so the other direction does not wait on a peer that is
// gone for a backend that might never speak again.
func endTunnel(dst, src net.Conn, err error) {
	if err != nil {
		dst.Close()
		src.Close()
		return
	}
	closeWrite(dst)
}

// tunnelBufSize is the buffer each direction of a tunnel copies through.
// 16 KiB holds a typical WebSocket frame burst in one read while keeping
// 10,000 open sessions under half a gigabyte at worst.
const tunnelBufSize = 16 << 10

var tunnelBufs = sync.Pool{New: func() any { b := make([]byte, tunnelBufSize); return &b }}

// pump copies src to dst until src ends or either side fails, and returns
// the bytes written and the first failure, nil when src ended cleanly. It copies through a pooled buffer rather than letting
// io.Copy splice: on Linux a TCP-to-TCP io.Copy splices through a pipe pair
// that Go keeps in a pool after the copy ends, so every tunnel would cost
// four more descriptors and leave them open for minutes after it closed.
// Hiding ReadFrom and WriteTo keeps a tunnel at its two sockets.
func pump(dst io.Writer, src io.Reader) (int64, error) {
	buf := tunnelBufs.Get().(*[]byte)
	n, err := io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *buf)
	tunnelBufs.Put(buf)
	return n, err
}

var upgradeField = []byte("Upgrade")

// closeWrite half-closes c: a TLS connection sends close_notify and then
// half-closes the socket under it. A connection that cannot be half-closed
// is closed.
func closeWrite(c net.Conn) {
	for {
		switch t := c.(type) {
		case *net.TCPConn:
			t.CloseWrite()
			return
		case *tls.Conn:
			if t.CloseWrite() != nil {
				t.Close()
				return
			}
			c = t.NetConn()
		case interface{ NetConn() net.Conn }:
			c = t.NetConn()
		default:
			c.Close()
			return
		}
	}
}
