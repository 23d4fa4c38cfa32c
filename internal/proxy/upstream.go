package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"relay/internal/backend"
	"relay/internal/h1"
	"relay/internal/rawio"
)

// upstreamBufSize is the read buffer of an upstream connection: large enough
// for a typical response head plus a small body in one read.
const upstreamBufSize = 8 << 10

// maxResponseHead caps a response head from a backend.
const maxResponseHead = 64 << 10

// poolIdleTimeout is how long an idle upstream connection may wait in the
// pool. It is shorter than the keep-alive timeouts of common servers (nginx
// 75 s, Apache 5 s is the exception), so relay rarely reuses a connection the
// backend is about to close.
const poolIdleTimeout = 30 * time.Second

// upstream is one keep-alive connection to a backend.
type upstream struct {
	conn   *sock
	br     *h1.Reader
	pool   *pool
	idleAt time.Time
	// pending is a request to write at the next Read.
	pending []byte
	rt      exchangeState
	rtFn    func(fd uintptr) bool
}

// pool holds idle connections to one backend, most recently used first
// (LIFO keeps few connections warm and lets the rest age out).
type pool struct {
	b      *backend.Backend
	cfg    *Config
	bufs   *h1.BufferPool
	mu     sync.Mutex
	idle   []*upstream
	closed bool
}

func newPool(b *backend.Backend, cfg *Config, bufs *h1.BufferPool) *pool {
	return &pool{b: b, cfg: cfg, bufs: bufs}
}

// get returns an idle connection, or dials a new one. reused reports which,
// since a reused connection may have been closed by the backend meanwhile.
func (p *pool) get(now time.Time) (u *upstream, reused bool, err error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		u = p.idle[len(p.idle)-1]
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(u.idleAt) < poolIdleTimeout {
			p.mu.Unlock()
			return u, true, nil
		}
		u.conn.Close()
	}
	p.mu.Unlock()
	u, err = p.dial()
	return u, false, err
}

func (p *pool) dial() (*upstream, error) {
	var (
		c   net.Conn
		err error
	)
	if p.cfg.Dial != nil {
		ctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
		c, err = p.cfg.Dial(ctx, "tcp", p.b.Addr)
		cancel()
	} else {
		d := net.Dialer{Timeout: p.cfg.ConnectTimeout}
		c, err = d.Dial("tcp", p.b.Addr)
	}
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", p.b.Name, err)
	}
	u := &upstream{conn: newSock(c), pool: p}
	u.br = h1.NewPooledReader(u, p.bufs, maxResponseHead)
	return u, nil
}

// put returns a connection whose last response was read to its end.
func (p *pool) put(u *upstream, now time.Time) {
	u.idleAt = now
	// An idle connection holds no buffer: with many backends, buffers taken
	// from one shared pool stay warm in the CPU cache, where one buffer per
	// connection would not.
	u.br.Release()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.cfg.MaxIdlePerBackend {
		p.mu.Unlock()
		u.conn.Close()
		return
	}
	p.idle = append(p.idle, u)
	p.mu.Unlock()
}

// close closes idle connections and makes later puts close theirs.
func (p *pool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, u := range idle {
		u.conn.Close()
	}
}

// send queues a complete request to be written by the next Read, inside the
// wait for the response (see Read).
func (u *upstream) send(b []byte) { u.pending = b }

// Read fills the response buffer. When a request is pending it writes the
// request and then waits for the socket to become readable before the first
// read, instead of trying a read that would almost always fail with EAGAIN:
// that saves a system call per request. The write happens inside the raw
// read callback, after Go's poller has reset the descriptor's readiness, so
// a response arriving right after the write cannot be missed.
func (u *upstream) Read(p []byte) (int, error) {
	if u.pending == nil {
		return u.conn.Read(p)
	}
	req := u.pending
	u.pending = nil
	if u.conn.raw == nil {
		if _, err := u.conn.Write(req); err != nil {
			return 0, err
		}
		return u.conn.Read(p)
	}
	rt := &u.rt
	*rt = exchangeState{req: req, buf: p}
	if u.rtFn == nil {
		u.rtFn = u.roundTripStep // bound once per connection, not per request
	}
	err := u.conn.raw.Read(u.rtFn)
	n, req, rerr, op := rt.n, rt.req, rt.err, rt.op
	*rt = exchangeState{}
	if err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, os.NewSyscallError(op, rerr)
	}
	if len(req) > 0 {
		// The socket buffer was full: finish through the poller.
		if _, err := u.conn.Write(req); err != nil {
			return 0, err
		}
		return u.conn.Read(p)
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// exchangeState is the state of one Read that writes a request first. It lives
// in the upstream so the raw callback needs no per-request closure.
type exchangeState struct {
	req, buf []byte
	written  bool
	n        int
	err      error
	op       string
}

// roundTripStep is the raw read callback: the first call writes the
// request and asks to wait for readability; later calls read.
func (u *upstream) roundTripStep(fd uintptr) bool {
	rt := &u.rt
	if !rt.written {
		rt.written = true
		for len(rt.req) > 0 {
			k, errno := rawio.Write(fd, rt.req)
			if errno != 0 {
				if errno != syscall.EAGAIN {
					rt.err, rt.op = errno, "write"
				}
				return true // on EAGAIN Read writes the rest
			}
			rt.req = rt.req[k:]
		}
		return false // wait for readability
	}
	n, errno := rawio.Read(fd, rt.buf)
	if errno == syscall.EAGAIN {
		return false
	}
	if errno != 0 {
		rt.err, rt.op = errno, "read"
	}
	rt.n = n
	return true
}

// alive reports whether an idle connection is still open: a peek that
// would block means the backend has neither closed it nor sent anything
// unexpected. Used before sending a request that must not be sent twice.
func (u *upstream) alive() bool {
	if u.conn.raw == nil {
		return true
	}
	var buf [1]byte
	ok := false
	err := u.conn.raw.Read(func(fd uintptr) bool {
		_, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = err == syscall.EAGAIN
		return true
	})
	return err == nil && ok
}

// isConnLoss reports errors that mean the connection was closed or reset.
func isConnLoss(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, h1.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
