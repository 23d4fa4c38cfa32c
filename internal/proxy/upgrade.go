package proxy

import (
	"io"
	"net"
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
	client := cc.conn.Conn
	sent := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(client, up)
		closeWrite(client)
		sent <- n
	}()
	io.Copy(up, client)
	closeWrite(up)
	return <-sent
}

var upgradeField = []byte("Upgrade")

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
		return
	}
	c.Close()
}
