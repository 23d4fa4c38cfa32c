package proxy

import (
	"io"
	"net"
	"time"

	"relay/internal/h1"
)

// upgrade completes a protocol switch (WebSocket and the like): it sends the
// backend's 101 to the client and then copies bytes both ways until either
// side closes. The connections are not reused afterwards. It returns the
// bytes sent to the client.
func (cc *clientConn) upgrade(u *upstream) int64 {
	resp := &cc.resp
	out := h1.AppendStatusLine(cc.out[:0], 101, resp.Reason)
	out = h1.AppendForwardFields(out, resp.Fields)
	out = append(out, "Connection: Upgrade\r\n"...)
	for i := range resp.Fields {
		if resp.Fields[i].Is("upgrade") {
			out = h1.AppendField(out, upgradeField, resp.Fields[i].Value)
		}
	}
	out = append(out, '\r', '\n')
	// Bytes that arrived behind the heads belong to the new protocol.
	out = append(out, u.br.Peek()...)
	u.br.Discard(u.br.Buffered())
	cc.out = out
	if _, err := cc.conn.Write(out); err != nil {
		return 0
	}
	if k := cc.br.Buffered(); k > 0 {
		if _, err := u.conn.Write(cc.br.Peek()); err != nil {
			return 0
		}
		cc.br.Discard(k)
	}
	var none time.Time
	cc.conn.SetDeadline(none)
	u.conn.SetDeadline(none)
	sent := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(cc.conn.Conn, u.conn.Conn)
		closeWrite(cc.conn.Conn)
		sent <- n
	}()
	io.Copy(u.conn.Conn, cc.conn.Conn)
	closeWrite(u.conn.Conn)
	return <-sent
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
		return
	}
	c.Close()
}
