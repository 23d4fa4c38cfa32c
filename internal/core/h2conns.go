package core

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"relay/internal/fds"
	"relay/internal/h2up"
	"relay/internal/rawio"
	"relay/internal/tlsconf"
)

// HTTP/2 connections to one backend. Requests share them as streams: a
// request takes a stream on the first connection with room for one (the
// backend's SETTINGS_MAX_CONCURRENT_STREAMS), and relay dials another
// when every connection is full. Balancing happens before: the pool picks
// the backend for each request, so calls that one client multiplexes on
// one connection still spread over every backend.
//
// A connection the backend sends GOAWAY leaves the list at once and
// closes itself when its streams have ended. One with no stream open is
// idle: PINGed once idle for pingIdle, so a backend that vanished is found
// before a request needs it, and closed once idle for the pool's
// upstream_idle_timeout, or at once beyond max_idle_conns_per_backend
// idle connections.

// h2Options are the bounds on one HTTP/2 connection to a backend.
var h2Options = h2up.Options{
	StreamWindow:   256 << 10,
	MaxHeaderBytes: maxResponseHead,
	MaxStreams:     100,
	WriteTimeout:   10 * time.Second,
}

// pingIdle is how long an HTTP/2 connection may sit without a stream
// before relay PINGs it.
const pingIdle = 15 * time.Second

// openStream opens a stream to the backend over proto, on a pooled
// connection with room or on a new one; fresh says the stream is on a new
// connection, whose dial took the time. Requests that find every
// connection full while one is being dialed wait for it, as many as it
// will take, rather than each dial its own.
func (p *conns) openStream(proto Protocol) (s *h2up.Stream, fresh bool, err error) {
	dials := 0
	for {
		p.mu.Lock()
		if s = p.openLocked(); s != nil {
			p.mu.Unlock()
			return s, false, nil
		}
		if d := p.dialWithRoom(); d != nil {
			d.waiters++
			p.mu.Unlock()
			<-d.done
			if d.err != nil {
				return nil, true, d.err
			}
			continue
		}
		d := &h2dialing{done: make(chan struct{})}
		p.h2dials = append(p.h2dials, d)
		p.mu.Unlock()
		c, err := p.dialH2(proto)
		p.mu.Lock()
		for i, e := range p.h2dials {
			if e == d {
				p.h2dials = append(p.h2dials[:i], p.h2dials[i+1:]...)
				break
			}
		}
		d.err = err
		switch {
		case err != nil:
		case p.closed:
			d.err = fmt.Errorf("backend %q: %w", p.b.Name, errPoolClosed)
			c.Close()
		case c.MaxStreams() == 0:
			// The backend takes no stream for now (RFC 9113 6.5.2): a
			// request is not to dial connection after connection.
			d.err = fmt.Errorf("backend %q: %w", p.b.Name, errNoStreams)
			c.Close()
		}
		if d.err != nil {
			p.mu.Unlock()
			close(d.done)
			return nil, true, d.err
		}
		p.h2room = max(c.MaxStreams(), 1)
		p.h2 = append(p.h2, c)
		if !p.h2armed {
			p.h2armed = true
			p.armH2()
		}
		s = c.Open()
		p.mu.Unlock()
		close(d.done)
		if s != nil {
			return s, true, nil
		}
		// Gone away, or closed, between its SETTINGS and the first
		// stream: dial again, a bounded number of times.
		if dials++; dials == maxFreshDials {
			return nil, true, fmt.Errorf("backend %q: %w", p.b.Name, errNoRoomFresh)
		}
	}
}

// maxFreshDials bounds the connections one request dials that turn out to
// take no stream.
const maxFreshDials = 3

// errNoRoomFresh: connections just dialed took no stream.
var errNoRoomFresh = errors.New("connections just dialed closed before taking a stream")

// h2dialing is a connection being dialed, which requests wait for rather
// than dial their own.
type h2dialing struct {
	done    chan struct{}
	waiters int   // under conns.mu
	err     error // set before done is closed
}

// dialWithRoom returns a connection being dialed that will have room for
// one more request, the dialer's own and those waiting counted; p.mu is
// held.
func (p *conns) dialWithRoom() *h2dialing {
	for _, d := range p.h2dials {
		if 1+d.waiters < p.h2room {
			return d
		}
	}
	return nil
}

// openLocked opens a stream on the first connection with room, dropping
// those that take no more streams at all; p.mu is held.
func (p *conns) openLocked() *h2up.Stream {
	for i := 0; i < len(p.h2); {
		c := p.h2[i]
		if !c.Usable() {
			// Draining or closed: it ends by itself.
			p.h2 = append(p.h2[:i], p.h2[i+1:]...)
			p.h2[:cap(p.h2)][len(p.h2)] = nil
			continue
		}
		if s := c.Open(); s != nil {
			return s
		}
		i++
	}
	return nil
}

// errPoolClosed: the backend left the pool while relay dialed it.
var errPoolClosed = errors.New("backend removed from the pool")

// errNoStreams: the backend's SETTINGS_MAX_CONCURRENT_STREAMS is 0.
var errNoStreams = errors.New("it allows no stream (SETTINGS_MAX_CONCURRENT_STREAMS 0)")

// dialH2 connects to the backend and starts HTTP/2 on the connection. Its
// descriptor's place in the budget is given back when the connection
// ends.
func (p *conns) dialH2(proto Protocol) (*h2up.Conn, error) {
	if !p.fds.Take() {
		return nil, fds.ErrSpent
	}
	nc, err := p.connectH2(proto)
	if err != nil {
		p.fds.Give()
		return nil, err
	}
	o := h2Options
	o.Name, o.Logger = p.b.Name, p.logger
	if p.warnings != nil {
		o.Warnings = p.warnings
	}
	c, err := h2up.Start(nc, o)
	if err != nil {
		nc.Close()
		p.fds.Give()
		return nil, fmt.Errorf("backend %q: %w", p.b.Name, err)
	}
	budget := p.fds
	go func() {
		<-c.Done()
		budget.Give()
	}()
	// The backend's SETTINGS come first: its stream limit holds from the
	// first request, and a backend that does not speak HTTP/2 fails here,
	// before a request is sent.
	t := time.NewTimer(p.cfg().ConnectTimeout)
	defer t.Stop()
	select {
	case <-c.Settled():
		return c, nil
	case <-c.Done():
		err = errors.New("it closed the connection without HTTP/2 SETTINGS: does it speak HTTP/2?")
	case <-t.C:
		c.Close()
		err = errors.New("no HTTP/2 SETTINGS within the connect timeout: does it speak HTTP/2?")
	}
	return nil, fmt.Errorf("backend %q: %w", p.b.Name, err)
}

// connectH2 dials the backend, with TLS and ALPN h2 for an h2 backend.
func (p *conns) connectH2(proto Protocol) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg().ConnectTimeout)
	defer cancel()
	c, err := p.dialTCP(ctx)
	if err != nil {
		return nil, err
	}
	// Streams write their requests when their clients' requests come;
	// gathered, the requests one read from the clients made ready leave
	// in one system call, as the responses to the clients do. A backend
	// that stops taking bytes fails the gathered write after WriteWait.
	under := rawio.NewConn(c)
	under.WriteWait = h2Options.WriteTimeout
	batch := rawio.NewBatchConn(under)
	batch.Batch()
	if proto != H2 {
		return batch, nil
	}
	tc := p.b.TLS()
	if tc == nil {
		c.Close()
		return nil, fmt.Errorf("backend %q: protocol h2 needs an https backend", p.b.Name)
	}
	t := tls.Client(batch, p.h2TLS(tc))
	if err := t.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("backend %q: %w: %w", p.b.Name, errHandshake, err)
	}
	if t.ConnectionState().NegotiatedProtocol != "h2" {
		c.Close()
		return nil, fmt.Errorf("backend %q: %w: it did not agree to HTTP/2 (ALPN h2)", p.b.Name, errHandshake)
	}
	return t, nil
}

// h2TLS returns the backend's TLS settings offering h2 by ALPN, made once
// for each settings the backend has.
func (p *conns) h2TLS(tc *tls.Config) *tls.Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.h2tlsOf != tc {
		p.h2tlsOf, p.h2tls = tc, tlsconf.H2(tc)
	}
	return p.h2tls
}

// armH2 has the HTTP/2 reaper run; p.mu is held.
func (p *conns) armH2() {
	d := max(min(p.cfg().IdleTimeout/2, pingIdle), 100*time.Millisecond)
	if p.h2reaper == nil {
		p.h2reaper = time.AfterFunc(d, p.reapH2)
		return
	}
	p.h2reaper.Reset(d)
}

// reapH2 closes the HTTP/2 connections idle for the pool's idle timeout,
// or beyond its count of idle connections (the newest are kept), and
// PINGs the others that have been idle a while.
func (p *conns) reapH2() {
	now := time.Now()
	cfg := p.cfg()
	var closing []*h2up.Conn
	p.mu.Lock()
	drop := make([]bool, len(p.h2))
	idle := 0
	for i := len(p.h2) - 1; i >= 0; i-- {
		c := p.h2[i]
		at := c.IdleSince()
		switch {
		case !c.Usable():
			drop[i] = true
		case at.IsZero():
			// A stream is open.
		case now.Sub(at) >= cfg.IdleTimeout || idle >= cfg.MaxIdlePerBackend:
			drop[i] = true
			closing = append(closing, c)
		default:
			idle++
			if now.Sub(at) >= pingIdle {
				c.Ping(cfg.ConnectTimeout)
			}
		}
	}
	keep := p.h2[:0]
	for i, c := range p.h2 {
		if !drop[i] {
			keep = append(keep, c)
		}
	}
	clear(p.h2[len(keep):cap(p.h2)])
	p.h2 = keep
	if len(p.h2) > 0 && !p.closed {
		p.armH2()
	} else {
		p.h2armed = false
	}
	p.mu.Unlock()
	for _, c := range closing {
		// A stream may have opened on it since IdleSince was read:
		// Drain lets it finish.
		c.Drain()
	}
}

// closeH2 drains every HTTP/2 connection: streams open finish, no new one
// starts. p.mu is held.
func (p *conns) closeH2() {
	for _, c := range p.h2 {
		c.Drain()
	}
	p.h2 = nil
	if p.h2reaper != nil {
		p.h2reaper.Stop()
	}
}
