package proxy

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"time"

	"relay/internal/core"
	"relay/internal/h1"
	"relay/internal/rawio"
)

// clientBufSize is the read buffer of a client connection. It grows up to
// MaxHeaderBytes for a large head. An idle keep-alive connection holds none:
// the buffer goes back to a pool shared by all connections while the
// connection waits for its next request.
const clientBufSize = 4 << 10

// clientConn is one client connection: the state its requests reuse, and
// the core.Responder through which the core answers them.
type clientConn struct {
	p *Proxy
	// raw is the accepted connection, for shutdown to wake or close;
	// conn is what requests are read from: raw, or TLS over it.
	raw    net.Conn
	tls    *tls.Config // nil on the cleartext listener
	conn   *rawio.Conn
	br     *h1.Reader
	state  atomic.Int32
	peer   core.Peer
	served int // requests served on this connection

	req  h1.Request
	body clientBody
	x    core.Exchange
	out  []byte // response head being written to the client
	hops []byte // what a chunked response's Connection fields name (Respond)
	// keep says whether the connection may carry another request after
	// this one; the responses written clear it.
	keep bool
	// handed says the connection went to the HTTP/2 server, which closes
	// it and reports its end.
	handed bool
	// idleSince is when the wait for the next request began; resting says
	// the wait has moved to a fresh goroutine (see defaultRestAfter).
	idleSince time.Time
	resting   bool
}

// defaultRestAfter is how long a kept-alive connection waits for its next
// request on the goroutine that served the last one. Serving grows a
// goroutine's stack to 4 KiB or more, and Go's collector never shrinks the
// stack of a goroutine parked in a read, so 10,000 idle connections would
// keep 40 MB of stacks. A connection still idle after that lets go of its
// head buffers (shed) and hands its wait to a fresh goroutine, on a fresh
// 2 KiB stack; the old one exits. A busy connection, whose next request
// comes sooner, never pays for the move: the wait's deadline is set for
// every request anyway, to the rest instead of the idle timeout.
const defaultRestAfter = time.Second

func newClientConn(p *Proxy, c net.Conn, tc *tls.Config) *clientConn {
	return &clientConn{p: p, raw: c, tls: tc}
}

// open readies the connection for requests read from c.
func (cc *clientConn) open(c net.Conn) {
	cc.conn = cc.wrap(c)
	var addr netip.AddrPort
	if a, ok := cc.raw.RemoteAddr().(*net.TCPAddr); ok {
		addr = a.AddrPort()
	}
	cc.peer = cc.p.core.NewPeer(addr, cc.tls != nil)
	if tc, ok := c.(*tls.Conn); ok {
		cs := tc.ConnectionState()
		cc.peer.Client = cc.p.core.ClientTLSOf(&cs)
	}
	cc.br = h1.NewPooledReader(cc.conn, cc.p.clientBufs, cc.p.cfg.MaxHeaderBytes)
	cc.body.cc = cc
	cc.x = core.Exchange{Req: &cc.req, Door: cc, Peer: &cc.peer}
}

// wrap makes c a rawio.Conn: raw system calls where c is a socket, and
// WriteWait, which cuts off a client that takes no bytes for IdleTimeout
// (nginx's send_timeout).
func (cc *clientConn) wrap(c net.Conn) *rawio.Conn {
	rc := rawio.NewConn(c)
	rc.WriteWait = cc.p.cfg.IdleTimeout
	return rc
}

// serve runs the connection: the TLS handshake on the TLS listener, then
// either the request loop of HTTP/1.1 or, for a client that chose HTTP/2,
// the hand-over to the HTTP/2 server.
func (cc *clientConn) serve() {
	c := cc.raw
	if cc.tls != nil {
		tc, h2, ok := cc.handshake()
		if !ok {
			cc.raw.Close()
			cc.p.srv.forget(cc)
			return
		}
		if h2 {
			cc.handOver(tc)
			return
		}
		c = tc
	}
	cc.open(c)
	cc.run()
}

// run serves requests until the connection ends, then closes it, or until
// it rests, when a fresh goroutine takes its wait over.
func (cc *clientConn) run() {
	if cc.loop() {
		go cc.run()
		return
	}
	if !cc.handed {
		cc.conn.Close()
		cc.br.Drop()
		cc.p.srv.forget(cc)
	}
}

// loop reads a head, forwards it, and repeats while both sides keep the
// connection alive. It reports true when the connection has been idle long
// enough to rest: its goroutine should make way for a fresh one.
func (cc *clientConn) loop() (rest bool) {
	for {
		if cc.br.Buffered() == 0 {
			// Idle between requests: shutdown may close us now.
			cc.state.Store(stateIdle)
		}
		if err := cc.awaitHead(); err != nil {
			if err == errRest {
				cc.shed()
				return true
			}
			cc.readFailed(err)
			return false
		}
		if cc.served == 0 && cc.tls == nil && cc.p.h2c() {
			if h2, err := cc.opensWithPreface(); err != nil {
				cc.readFailed(err)
				return false
			} else if h2 {
				cc.handOverCleartext()
				return false
			}
		}
		err := cc.br.ReadRequest(&cc.req)
		if err != nil {
			cc.readFailed(err)
			return false
		}
		cc.state.Store(stateActive)
		cc.served++
		if !cc.handle() {
			return false
		}
	}
}

// awaitHead sets the deadline for the next request head. A new
// connection's first head, and a head whose first bytes are already here,
// must arrive whole within HeaderTimeout. On a kept-alive connection relay
// waits up to IdleTimeout for the first byte, and then gives the rest of
// the head HeaderTimeout, so a client cannot dribble a head for as long as
// a connection may sit idle.
//
// The idle wait first runs only until the connection may rest
// (defaultRestAfter); when that passes with nothing read, awaitHead
// returns errRest, and the fresh goroutine's call waits out the rest of
// the idle timeout, counted from the same start.
//
// An idle connection returns errStopping once shutdown has begun. The check
// comes after the deadline is set: shutdown wakes idle connections with a
// deadline of now, and one set here after that would override it.
func (cc *clientConn) awaitHead() error {
	now := time.Now()
	whole := cc.served == 0 || cc.br.Buffered() > 0
	willRest := false
	switch {
	case whole:
		cc.conn.SetReadDeadline(now.Add(cc.p.cfg.HeaderTimeout))
	case cc.resting:
		cc.resting = false
		cc.conn.SetReadDeadline(cc.idleSince.Add(cc.p.cfg.IdleTimeout))
	case cc.p.cfg.restAfter < cc.p.cfg.IdleTimeout:
		cc.idleSince = now
		willRest = true
		cc.conn.SetReadDeadline(now.Add(cc.p.cfg.restAfter))
	default:
		cc.conn.SetReadDeadline(now.Add(cc.p.cfg.IdleTimeout))
	}
	if cc.br.Buffered() == 0 && cc.p.srv.stopping.Load() {
		return errStopping
	}
	if whole {
		return nil
	}
	if err := cc.br.Fill(); err != nil {
		if willRest && cc.br.Buffered() == 0 && errors.Is(err, os.ErrDeadlineExceeded) && !cc.p.srv.stopping.Load() {
			cc.resting = true
			return errRest
		}
		return err
	}
	if !cc.br.HeadBuffered() {
		cc.conn.SetReadDeadline(time.Now().Add(cc.p.cfg.HeaderTimeout))
	}
	return nil
}

// handle serves the request in cc.req through the core and reports whether
// the connection stays open for another.
func (cc *clientConn) handle() bool {
	cc.keep = !cc.req.Close && !cc.p.srv.stopping.Load()
	cc.x.Body = nil
	cc.x.Proto = "HTTP/1.1"
	if cc.req.Minor == 0 {
		cc.x.Proto = "HTTP/1.0"
	}
	if cc.req.HasBody() {
		cc.body.reset()
		cc.x.Body = &cc.body
	}
	cc.p.core.Forward(&cc.x)
	// Unread request body bytes would be taken for the next request.
	return cc.keep && cc.bodyRead()
}

// bodyRead reports whether the request body has been read to its end, so
// the connection is positioned at the next request.
func (cc *clientConn) bodyRead() bool { return cc.x.Body == nil || cc.body.Done() }

// shed lets go of the head buffers a connection keeps between requests,
// once it rests: a connection idle for a second is likely to stay so, and
// its next request can allocate them again.
func (cc *clientConn) shed() {
	cc.out = nil
	cc.req = h1.Request{}
	cc.x.Shed()
}

// errStopping ends an idle connection when relay shuts down.
var errStopping = errors.New("relay is shutting down")

// errRest moves an idle connection's wait to a fresh goroutine.
var errRest = errors.New("idle long enough to rest")

// readFailed answers a request head that could not be read, if there is
// anyone to answer.
func (cc *clientConn) readFailed(err error) {
	var he *h1.Error
	switch {
	case errors.As(err, &he):
		cc.writeError(he.Status, he.Msg, true)
		cc.p.core.LogRejected(&cc.peer, he.Status)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// An idle keep-alive connection timing out is normal; a
		// half-sent head gets 408 (shutdown wakes idle readers with a
		// deadline too, and they have nothing buffered).
		if cc.br.Buffered() > 0 && !cc.p.srv.stopping.Load() {
			cc.writeError(408, "request head not received in time", true)
			cc.p.core.LogRejected(&cc.peer, 408)
		}
	case errors.Is(err, io.EOF), errors.Is(err, h1.ErrUnexpectedEOF):
	}
}

// writeError sends a short plain-text response generated by relay itself
// and returns its body's length.
func (cc *clientConn) writeError(status int, msg string, close bool) (int64, error) {
	cc.out = appendError(cc.out[:0], status, msg, close, cc.x.RequestID())
	_, err := cc.conn.Write(cc.out)
	return core.ErrorBodyLen(status, msg), err
}

// appendError appends relay's own error response: status, a plain-text
// body naming msg, Retry-After on a 503, X-Request-Id when the request
// has an id, and Connection: close if close.
func appendError(b []byte, status int, msg string, close bool, id []byte) []byte {
	b = h1.AppendStatusLine(b, status, nil)
	b = h1.AppendFieldString(b, "Content-Type", "text/plain; charset=utf-8")
	if status == 503 {
		b = h1.AppendFieldString(b, "Retry-After", core.RetryAfter)
	}
	if len(id) > 0 {
		b = h1.AppendField(b, core.RequestIDField, id)
	}
	b = h1.AppendContentLength(b, core.ErrorBodyLen(status, msg))
	if close {
		b = h1.AppendFieldString(b, "Connection", "close")
	}
	b = append(b, '\r', '\n')
	return core.AppendErrorBody(b, status, msg)
}
