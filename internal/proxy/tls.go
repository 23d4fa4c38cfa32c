package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"slices"
	"time"

	"relay/internal/rawio"
)

// HTTP2 serves the connections of clients that speak HTTP/2: over TLS
// when they chose h2 by ALPN, in cleartext when they open with the
// HTTP/2 preface and h2c is on. h2.Server is relay's.
type HTTP2 interface {
	// ServeConn serves c and calls closed when c has ended.
	ServeConn(c net.Conn, closed func())
	// Shutdown sends GOAWAY, lets open streams finish, and returns when
	// every connection has ended or ctx is done.
	Shutdown(ctx context.Context) error
}

// SetHTTP2 gives the front door its HTTP/2 server, before it serves.
// Without one, TLS clients are offered HTTP/1.1 only and h2c is off.
func (p *Proxy) SetHTTP2(h HTTP2) { p.h2 = h }

func (p *Proxy) h2c() bool { return p.h2 != nil && p.cfg.H2C }

// ServeTLS is Serve for a TLS listener: each connection's handshake, with
// tc, runs on the connection's own goroutine within HeaderTimeout.
func (p *Proxy) ServeTLS(ln net.Listener, tc *tls.Config) error {
	if p.h2 == nil {
		// Offer HTTP/1.1 only, in the configuration GetConfigForClient
		// picks as well.
		base, pick := tc.Clone(), tc.GetConfigForClient
		base.NextProtos = []string{"http/1.1"}
		if pick != nil {
			base.GetConfigForClient = func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
				c, err := pick(hi)
				if c != nil && !slices.Equal(c.NextProtos, []string{acmeTLS1}) {
					c = c.Clone()
					c.NextProtos = base.NextProtos
				}
				return c, err
			}
		}
		tc = base
	}
	return p.serve(ln, tc)
}

// handshake runs the TLS handshake and says whether the client chose
// HTTP/2. A failed handshake is logged at debug level: scanners and
// clients that distrust the certificate make plenty of them.
func (cc *clientConn) handshake() (tc *tls.Conn, h2, ok bool) {
	// TLS records go over raw system calls like cleartext requests: Go's
	// own socket calls would wake the runtime's monitor thread (see
	// rawio.File).
	under := cc.wrap(cc.raw)
	batch := rawio.NewBatchConn(under)
	tc = tls.Server(batch, cc.tls)
	// Set through under, which then knows the write deadline: WriteWait
	// must not outlast it.
	under.SetDeadline(time.Now().Add(cc.p.cfg.HeaderTimeout))
	if cc.p.srv.stopping.Load() {
		// Shutdown's wake-up deadline may have come before ours: a
		// client with no request yet is closed like an idle one.
		return nil, false, false
	}
	if err := tc.Handshake(); err != nil {
		cc.p.cfg.Logger.Debug("TLS handshake failed", "client", cc.raw.RemoteAddr().String(), "err", err)
		return nil, false, false
	}
	under.SetDeadline(time.Time{})
	proto := tc.ConnectionState().NegotiatedProtocol
	if proto == acmeTLS1 {
		// A CA's TLS-ALPN-01 validation: the handshake was the answer
		// (RFC 8737), and no request follows.
		return nil, false, false
	}
	h2 = proto == "h2"
	if h2 {
		// Each stream writes its own response; the records of those
		// that are ready together go out together.
		batch.Batch()
	}
	return tc, h2, true
}

// acmeTLS1 is the protocol of a CA's TLS-ALPN-01 validation.
const acmeTLS1 = "acme-tls/1"

// handOver gives c to the HTTP/2 server. The connection stays counted
// (and holds its max_connections slot) until that server is done with it.
func (cc *clientConn) handOver(c net.Conn) {
	cc.handed = true
	cc.state.Store(stateHTTP2)
	cc.p.h2.ServeConn(c, func() { cc.p.srv.forget(cc) })
}

// preface opens every HTTP/2 connection.
var preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// opensWithPreface reads until the buffered bytes either are the HTTP/2
// preface or cannot become it.
func (cc *clientConn) opensWithPreface() (bool, error) {
	for {
		b := cc.br.Peek()
		n := min(len(b), len(preface))
		if !bytes.Equal(b[:n], preface[:n]) {
			return false, nil
		}
		if n == len(preface) {
			return true, nil
		}
		if err := cc.br.Fill(); err != nil {
			return false, err
		}
	}
}

// handOverCleartext gives an h2c connection to the HTTP/2 server, the
// bytes already read first.
func (cc *clientConn) handOverCleartext() {
	read := bytes.Clone(cc.br.Peek())
	cc.br.Discard(len(read))
	cc.br.Release()
	cc.raw.SetReadDeadline(time.Time{})
	batch := rawio.NewBatchConn(cc.conn) // the socket the preface came through
	batch.Batch()
	cc.handOver(&replayConn{Conn: batch, pending: read})
}

// replayConn reads pending before the connection's own bytes.
type replayConn struct {
	net.Conn
	pending []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
