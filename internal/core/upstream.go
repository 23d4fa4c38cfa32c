package core

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"relay/internal/backend"
	"relay/internal/fds"
	"relay/internal/h1"
	"relay/internal/h2up"
	"relay/internal/logging"
	"relay/internal/rawio"
)

// upstreamBufSize is the read buffer of an upstream connection: large enough
// for a typical response head plus a small body in one read.
const upstreamBufSize = 8 << 10

// maxResponseHead caps a response head from a backend.
const maxResponseHead = 64 << 10

// watchInterval is how often a wait for a backend looks at whether the
// client is still there; a client that goes away cancels its upstream
// request within this.
const watchInterval = 500 * time.Millisecond

// errClientGone ends a wait for a backend whose client went away.
var errClientGone = errors.New("client went away")

// upstream is one keep-alive connection to a backend.
type upstream struct {
	conn   *rawio.Conn
	br     *h1.Reader
	idleAt time.Time
	// pending is a request to write at the next Read.
	pending []byte
	// until bounds the current wait for the backend; door is the client
	// side of the exchange, asked at every watchInterval of it whether the
	// client is still there.
	until time.Time
	door  Responder
	// fds is the budget the connection's descriptor counts against,
	// given back when it closes.
	fds *fds.Budget
}

// conns holds idle connections to one backend. The most recently used is
// taken first (LIFO keeps few connections warm and lets the rest age out),
// and a timer closes those idle for IdleTimeout whether or not traffic
// comes, so after a load relay's descriptors go back to where they were.
type conns struct {
	b    *backend.Backend
	conf *atomic.Pointer[settings] // the pool's
	bufs *h1.BufferPool
	fds  *fds.Budget // the process's descriptors; nil: no bound
	// pooled counts the idle connections of every pool of the core, for
	// Core.reclaimIdle.
	pooled *atomic.Int64
	mu     sync.Mutex
	idle   []*upstream // oldest first
	reaper *time.Timer // armed while idle is not empty
	armed  bool
	closed bool
	// HTTP/2 (h2conns.go), under mu: the connections, oldest first, and
	// their reaper, armed while there are any; the backend's TLS
	// settings with ALPN h2, and the settings they were made from.
	h2       []*h2up.Conn
	h2dials  []*h2dialing // the connections being dialed
	h2room   int          // streams the backend takes on a connection, as last seen
	h2reaper *time.Timer
	h2armed  bool
	h2tls    *tls.Config
	h2tlsOf  *tls.Config
	logger   *slog.Logger
	warnings *logging.Limited // HTTP/2 connections' warnings (Core.backendLog)
}

func newConns(b *backend.Backend, conf *atomic.Pointer[settings], bufs *h1.BufferPool, budget *fds.Budget, pooled *atomic.Int64, logger *slog.Logger, warnings *logging.Limited) *conns {
	return &conns{b: b, conf: conf, bufs: bufs, fds: budget, pooled: pooled, logger: logger, warnings: warnings, h2room: 100}
}

// cfg returns the pool's settings now.
func (p *conns) cfg() *settings { return p.conf.Load() }

// get returns an idle connection, or dials a new one. reused reports which,
// since a reused connection may have been closed by the backend meanwhile.
func (p *conns) get(now time.Time) (u *upstream, reused bool, err error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		u = p.idle[len(p.idle)-1]
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
		p.pooled.Add(-1)
		if now.Sub(u.idleAt) < p.cfg().IdleTimeout {
			p.mu.Unlock()
			return u, true, nil
		}
		u.close()
	}
	p.mu.Unlock()
	u, err = p.dial()
	return u, false, err
}

// dial connects to the backend, TLS handshake included, within the
// connect timeout. Its descriptor takes a place in the process's budget
// first: without one, or when the system refuses a socket, the error is
// relay's shortage (fds.IsExhaustion), not the backend's fault.
func (p *conns) dial() (*upstream, error) {
	if !p.fds.Take() {
		return nil, fds.ErrSpent
	}
	u, err := p.connect()
	if err != nil {
		p.fds.Give()
		return nil, err
	}
	u.fds = p.fds
	return u, nil
}

// connect dials the backend and runs the TLS handshake of an https one.
func (p *conns) connect() (*upstream, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg().ConnectTimeout)
	defer cancel()
	c, err := p.dialTCP(ctx)
	if err != nil {
		return nil, err
	}
	if tc := p.b.TLS(); tc != nil {
		if c, err = p.handshake(ctx, c, tc); err != nil {
			return nil, err
		}
	}
	u := &upstream{conn: rawio.NewConn(c)}
	u.br = h1.NewPooledReader(u, p.bufs, maxResponseHead)
	return u, nil
}

// dialTCP connects to the backend's address within ctx.
func (p *conns) dialTCP(ctx context.Context) (net.Conn, error) {
	dial := p.cfg().Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	c, err := dial(ctx, "tcp", p.b.Addr)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", p.b.Name, err)
	}
	return c, nil
}

// errHandshake marks a failed TLS handshake: the backend took the
// connection, so it is up, but relay could not talk to it.
var errHandshake = errors.New("TLS handshake")

// handshake runs the TLS handshake with an https backend within ctx. The
// client session cache in tc lets later connections resume the session
// instead of a full handshake.
func (p *conns) handshake(ctx context.Context, c net.Conn, tc *tls.Config) (net.Conn, error) {
	t := tls.Client(rawio.NewConn(c), tc) // records over raw system calls
	if err := t.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("backend %q: %w: %w", p.b.Name, errHandshake, err)
	}
	return t, nil
}

// put returns a connection whose last response was read to its end.
func (p *conns) put(u *upstream, now time.Time) {
	u.idleAt, u.door = now, nil
	// An idle connection holds no buffer: with many backends, buffers taken
	// from one shared pool stay warm in the CPU cache, where one buffer per
	// connection would not.
	u.br.Release()
	p.mu.Lock()
	if p.closed || len(p.idle) >= p.cfg().MaxIdlePerBackend {
		p.mu.Unlock()
		u.close()
		return
	}
	p.idle = append(p.idle, u)
	p.pooled.Add(1)
	if !p.armed {
		p.armed = true
		p.arm(p.cfg().IdleTimeout)
	}
	p.mu.Unlock()
}

// arm has the reaper run after d; p.mu is held.
func (p *conns) arm(d time.Duration) {
	if p.reaper == nil {
		p.reaper = time.AfterFunc(d, p.reap)
		return
	}
	p.reaper.Reset(d)
}

// reap closes the connections idle for IdleTimeout and runs again when
// the oldest of the others will be.
func (p *conns) reap() {
	now := time.Now()
	p.mu.Lock()
	k := 0
	for k < len(p.idle) && now.Sub(p.idle[k].idleAt) >= p.cfg().IdleTimeout {
		k++
	}
	expired := append([]*upstream(nil), p.idle[:k]...)
	p.idle = append(p.idle[:0], p.idle[k:]...)
	clear(p.idle[len(p.idle):cap(p.idle)])
	p.pooled.Add(-int64(k))
	if len(p.idle) > 0 && !p.closed {
		p.arm(p.idle[0].idleAt.Add(p.cfg().IdleTimeout).Sub(now))
	} else {
		p.armed = false
	}
	p.mu.Unlock()
	for _, u := range expired {
		u.close()
	}
}

// close closes idle connections and makes later puts close theirs.
func (p *conns) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.pooled.Add(-int64(len(idle)))
	if p.reaper != nil {
		p.reaper.Stop()
	}
	p.closeH2()
	p.mu.Unlock()
	for _, u := range idle {
		u.close()
	}
}

// oldestIdle returns when the longest idle connection was pooled; ok is
// false when none is.
func (p *conns) oldestIdle() (at time.Time, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) == 0 {
		return at, false
	}
	return p.idle[0].idleAt, true
}

// takeOldest removes the longest idle connection from the pool and
// returns it, or nil if there is none now.
func (p *conns) takeOldest() *upstream {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) == 0 {
		return nil
	}
	u := p.idle[0]
	p.idle = append(p.idle[:0], p.idle[1:]...)
	p.idle[:cap(p.idle)][len(p.idle)] = nil
	p.pooled.Add(-1)
	return u
}

// close closes the connection and gives its descriptor's place back.
func (u *upstream) close() {
	u.conn.Close()
	u.fds.Give()
	u.fds = nil
}

// send queues a complete request to be written by the next Read, inside the
// wait for the response (rawio.Conn.WriteThenRead).
func (u *upstream) send(b []byte) { u.pending = b }

// wait bounds the next reads from the backend by timeout from now, for the
// client behind door. The socket's deadline is at most watchInterval away,
// so a long wait wakes up to see whether the client is still there; a
// quick answer costs nothing more than the deadline it always had.
func (u *upstream) wait(now time.Time, timeout time.Duration, door Responder) {
	u.until, u.door = now.Add(timeout), door
	u.conn.SetReadDeadline(u.watchDeadline(now))
}

func (u *upstream) watchDeadline(now time.Time) time.Time {
	if d := now.Add(watchInterval); d.Before(u.until) {
		return d
	}
	return u.until
}

// Read fills the response buffer, writing a pending request first. A wait
// that reaches a watch deadline before its own goes on while the client is
// there, and ends with errClientGone when it is not.
func (u *upstream) Read(p []byte) (int, error) {
	var n int
	var err error
	if u.pending == nil {
		n, err = u.conn.Read(p)
	} else {
		req := u.pending
		u.pending = nil
		n, err = u.conn.WriteThenRead(req, p)
	}
	for err != nil && u.door != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		now := time.Now()
		if !now.Before(u.until) {
			break
		}
		if u.door.Gone() {
			return 0, errClientGone
		}
		u.conn.SetReadDeadline(u.watchDeadline(now))
		n, err = u.conn.Read(p)
	}
	return n, err
}

// alive reports whether an idle connection is still open and quiet: the
// backend has neither closed it nor sent anything unasked. Used before
// sending a request that must not be sent twice. A connection relay cannot
// peek at (see rawio.Quiet) does not count as alive, so such a request gets
// a new connection rather than risk a closed one.
func (u *upstream) alive() bool { return rawio.Quiet(u.conn.Conn) }

// isConnLoss reports errors that mean the connection was closed or reset.
func isConnLoss(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, h1.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
