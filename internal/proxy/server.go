package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"relay/internal/fds"
	"relay/internal/stats"
)

// Connection states, for graceful shutdown: an idle connection waits for its
// next request and may be closed at once; an active one finishes first.
const (
	stateIdle int32 = iota
	stateActive
	stateHTTP2 // handed to the HTTP/2 server, which drains it
)

// server tracks listeners and client connections for graceful shutdown.
type server struct {
	p        *Proxy
	mu       sync.Mutex
	lns      map[net.Listener]struct{}
	conns    map[*clientConn]struct{}
	stopping atomic.Bool
	accepted atomic.Uint64 // client connections ever accepted
	slots    chan struct{} // connection cap; nil when uncapped
	done     chan struct{} // closed when the last connection ends during shutdown
}

func (s *server) init(p *Proxy) {
	s.p = p
	s.lns = make(map[net.Listener]struct{})
	s.conns = make(map[*clientConn]struct{})
	if p.cfg.MaxConnections > 0 {
		s.slots = make(chan struct{}, p.cfg.MaxConnections)
	}
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("proxy: server closed")

// Serve accepts connections on ln and serves each on its own goroutine until
// Shutdown. When the connection cap is reached it stops accepting until a
// connection ends, as HAProxy's maxconn does, so the kernel's backlog queues
// the excess instead of relay refusing it.
func (p *Proxy) Serve(ln net.Listener) error { return p.serve(ln, nil) }

// serve accepts on ln; a non-nil tc makes it a TLS listener.
func (p *Proxy) serve(ln net.Listener, tc *tls.Config) error {
	s := &p.srv
	s.mu.Lock()
	if s.stopping.Load() {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	var backoff time.Duration
	for {
		if s.slots != nil {
			s.slots <- struct{}{}
		}
		c, err := ln.Accept()
		if err != nil {
			if s.slots != nil {
				<-s.slots
			}
			if s.stopping.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				// Out of file descriptors and the like: wait and retry
				// rather than spin or give up.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				p.cfg.Logger.Error("accept failed", "err", err, "retry_in", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.accepted.Add(1)
		if !p.core.Descriptors().Take() {
			p.refuse(c, tc != nil)
			s.release()
			continue
		}
		cc := newClientConn(p, c, tc)
		if !s.track(cc) {
			c.Close()
			s.release()
			p.core.Descriptors().Give()
			continue
		}
		go cc.serve()
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (s *server) track(cc *clientConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping.Load() {
		return false
	}
	s.conns[cc] = struct{}{}
	return true
}

func (s *server) forget(cc *clientConn) {
	s.mu.Lock()
	delete(s.conns, cc)
	last := len(s.conns) == 0 && s.done != nil
	s.mu.Unlock()
	s.release()
	s.p.core.Descriptors().Give()
	if last {
		close(s.done)
	}
}

// release gives back a connection's slot under the cap.
func (s *server) release() {
	if s.slots != nil {
		<-s.slots
	}
}

// refused503 is the whole answer to a client connection relay has no
// descriptor for.
var refused503 = appendError(nil, 503, fds.ErrSpent.Error(), true, nil)

// refuse ends a connection accepted while the process's descriptor budget
// is spent, so that accepting never fails for want of one (EMFILE) and the
// listener keeps taking and answering clients: a cleartext client is told
// 503 if its socket takes the answer at once, a TLS one is closed.
func (p *Proxy) refuse(c net.Conn, isTLS bool) {
	p.core.ShortOfDescriptors(fds.ErrSpent)
	if !isTLS {
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.Write(refused503)
	}
	c.Close()
}

// Connections returns the number of open client connections.
func (p *Proxy) Connections() int {
	p.srv.mu.Lock()
	defer p.srv.mu.Unlock()
	return len(p.srv.conns)
}

// Stats returns what the front door and its core counted, as of now.
func (p *Proxy) Stats() *stats.Process {
	st := &stats.Process{ConnsOpen: int64(p.Connections()), ConnsAccepted: p.srv.accepted.Load()}
	p.core.Stats(st)
	return st
}

// Shutdown stops accepting, closes idle client connections, lets active
// ones finish their current request (answering it with Connection: close),
// and returns when every connection has ended or ctx is done, in which case
// the remaining client connections are closed and ctx's error is returned.
func (p *Proxy) Shutdown(ctx context.Context) error {
	s := &p.srv
	s.mu.Lock()
	s.stopping.Store(true)
	for ln := range s.lns {
		ln.Close()
	}
	done := make(chan struct{})
	if len(s.conns) == 0 {
		close(done)
	} else {
		s.done = done
	}
	conns := make([]*clientConn, 0, len(s.conns))
	for cc := range s.conns {
		conns = append(conns, cc)
	}
	s.mu.Unlock()
	// A connection marks itself idle before checking stopping, and we
	// check its state after setting stopping, so every idle connection is
	// woken by one side or the other.
	for _, cc := range conns {
		if cc.state.Load() == stateIdle {
			cc.raw.SetReadDeadline(time.Now())
		}
	}
	// HTTP/2 connections get GOAWAY and finish their streams; each one
	// that ends is forgotten here like any other connection.
	var h2err chan error
	if p.h2 != nil {
		h2err = make(chan error, 1)
		go func() { h2err <- p.h2.Shutdown(ctx) }()
	}
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.mu.Lock()
		for cc := range s.conns {
			// Requests still waiting on a backend end with their
			// connection; their goroutines exit on the next I/O.
			cc.raw.Close()
		}
		s.mu.Unlock()
	}
	if h2err != nil {
		<-h2err
	}
	p.core.CloseIdle()
	return err
}
