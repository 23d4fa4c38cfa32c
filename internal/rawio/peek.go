package rawio

import (
	"net"
	"sync"
	"syscall"
)

// Quiet reports whether nothing has arrived on an idle connection, neither
// data nor its end: a non-blocking one-byte MSG_PEEK on its socket, which
// consumes nothing and never waits. relay asks before it reuses a kept
// connection for something that must not be lost to a connection the peer
// closed while it sat idle (a request that must not be sent twice, a health
// probe).
//
// A connection that wraps a socket (crypto/tls.Conn, through its NetConn
// method, and anything else that offers one) is unwrapped to the socket
// underneath, so for TLS a pending record (a close_notify alert, a late
// session ticket) or the peer's FIN counts as not quiet, as it should: the
// connection is not known to be where it was left. Bytes the wrapper has
// already taken off the socket and holds itself are out of its sight.
//
// The fallback for a connection with no socket anywhere underneath (an
// in-memory connection, a custom dialer's): Quiet cannot look, and answers
// false, "not known to be quiet", so the caller opens a new connection
// rather than risk one that may be closed.
func Quiet(c net.Conn) bool {
	sc, ok := socketOf(c)
	return ok && peekQuiet(sc)
}

// socketOf unwraps c to the socket underneath (a crypto/tls.Conn through
// its NetConn method, and anything else that offers one); ok is false when
// there is none.
func socketOf(c net.Conn) (syscall.Conn, bool) {
	for {
		if sc, ok := c.(syscall.Conn); ok {
			return sc, true
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil, false
		}
		c = w.NetConn()
	}
}

// PeerGone reports whether the peer of a connection is known to have
// closed it or reset it: a non-blocking one-byte MSG_PEEK sees the end of
// the stream or an error. Data waiting to be read, or nothing at all, is
// not gone; neither is a connection Quiet cannot look at (see there), for
// which the answer is "not known". The end of the stream also means a peer
// that only shut down its sending side; like nginx, relay takes that as
// the client having given up.
func PeerGone(c net.Conn) bool {
	sc, ok := socketOf(c)
	if !ok {
		return false
	}
	n, ok, err := peek(sc)
	return ok && ((n == 0 && err == nil) || (err != nil && err != syscall.EAGAIN && err != syscall.EINTR))
}

// peeker is the state of one peek. Its callback is bound once and peekers
// are pooled, so a peek allocates only what SyscallConn does: a closure
// made per call would take its buffer and result to the heap with it.
type peeker struct {
	buf [1]byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

var peekers = sync.Pool{New: func() any {
	p := new(peeker)
	p.fn = p.peek
	return p
}}

func (p *peeker) peek(fd uintptr) bool {
	p.n, _, p.err = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true // never wait
}

// peek peeks at one byte of sc's socket without waiting and returns what
// recv(2) did; ok is false when the socket could not be reached.
func peek(sc syscall.Conn) (n int, ok bool, err error) {
	raw, rerr := sc.SyscallConn()
	if rerr != nil {
		return 0, false, nil
	}
	p := peekers.Get().(*peeker)
	rerr = raw.Read(p.fn)
	n, err = p.n, p.err
	p.n, p.err = 0, nil
	peekers.Put(p)
	return n, rerr == nil, err
}

func peekQuiet(sc syscall.Conn) bool {
	_, ok, err := peek(sc)
	return ok && err == syscall.EAGAIN
}
