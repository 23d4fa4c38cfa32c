// Package h2 is relay's HTTP/2 server: the front door for clients that
// chose h2 by ALPN, and for cleartext ones that opened with the HTTP/2
// preface (h2c). Each request goes through the same forwarding core as an
// HTTP/1.1 request (package core) and reaches its backend over the core's
// pooled HTTP/1.1 connections.
//
// Frames and header compression are golang.org/x/net/http2's: its Framer
// reads and writes frames, checks their sizes, orders CONTINUATION
// frames, decodes HPACK and bounds a header block (CVE-2023-45288). This
// package is the connection around them (RFC 9113): the stream states,
// flow control both ways, settings, PING, GOAWAY, limits on what one
// client may ask, and the request and response as the core sees them.
//
// How a connection runs:
//   - one goroutine reads frames (conn.serve) and acts on them at once;
//     it never waits for a stream;
//   - each request runs on a goroutine of its own (stream.run), as it would
//     on relay's HTTP/1.1 door, and writes its response frames itself,
//     under the connection's write lock (write.go);
//   - the written frames go through a rawio.BatchConn, so the responses of
//     many streams leave in one system call.
//
// Go's net/http server would do the same work with a goroutine per
// connection in the middle of every exchange: each frame read, each
// response header and each DATA frame goes to it over a channel and back.
// Doing without it is what makes this server cheaper per request.
package h2

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"relay/internal/core"
	"relay/internal/logging"
)

// Limits bound what one HTTP/2 client may ask of relay.
type Limits struct {
	// MaxConcurrentStreams caps the streams a client may have open at
	// once.
	MaxConcurrentStreams int
	// MaxHeaderBytes caps a request's header list, CONTINUATION frames
	// included (HPACK's size: name, value and 32 bytes per field).
	MaxHeaderBytes int
	// IdleTimeout closes a connection with no open stream for that long,
	// and one that sends nothing for that long and then leaves a PING
	// unanswered for pingTimeout. A client that stops taking bytes is cut
	// off by the socket (rawio.Conn's WriteWait) or, when it stops
	// granting flow-control window, by its streams.
	IdleTimeout time.Duration
	// HeaderTimeout bounds the wait for a connection's preface and first
	// SETTINGS frame, and for the rest of a frame, or of a header block,
	// once it has begun to arrive.
	HeaderTimeout time.Duration
}

// pingTimeout is how long a PING sent to a silent client may go
// unanswered.
const pingTimeout = 15 * time.Second

// Server serves HTTP/2 connections handed to it by the front door.
type Server struct {
	core *core.Core
	body core.BodyTime
	lim  Limits
	log  *slog.Logger
	// abuseLog is log for the lines a client's abuse causes: at most
	// abuseLines a second, for all connections together.
	abuseLog *logging.Limited

	mu       sync.Mutex
	conns    map[*conn]struct{}
	stopping bool
	ended    chan struct{} // signalled when a connection ends
}

// NewServer returns a Server forwarding every request through c, whose
// clients have the time bt gives to send a request body. log receives
// what goes wrong with clients, at debug level unless it is abuse.
func NewServer(c *core.Core, bt core.BodyTime, lim Limits, log *slog.Logger) *Server {
	if lim.MaxConcurrentStreams <= 0 {
		lim.MaxConcurrentStreams = 100
	}
	if lim.MaxHeaderBytes <= 0 {
		lim.MaxHeaderBytes = 64 << 10
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{core: c, body: bt, lim: lim, log: log, abuseLog: logging.NewLimited(log, abuseLines, time.Second),
		conns: make(map[*conn]struct{}), ended: make(chan struct{}, 1)}
}

// ServeConn serves nc, whose TLS handshake (if any) is done, until the
// connection ends, then calls closed. After Shutdown it refuses nc with
// GOAWAY instead.
func (s *Server) ServeConn(nc net.Conn, closed func()) {
	s.mu.Lock()
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		goAway(nc)
		closed()
		return
	}
	c := newConn(s, nc)
	// The server's preface goes first: a GOAWAY from a Shutdown that
	// starts now must follow it.
	c.sendPreface()
	s.mu.Lock()
	s.conns[c] = struct{}{}
	stopping = s.stopping
	s.mu.Unlock()
	if stopping {
		c.shutdown()
	}

	c.serve()

	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	select {
	case s.ended <- struct{}{}:
	default:
	}
	closed()
}

// Shutdown sends every connection GOAWAY, lets open streams finish and
// returns when all connections have ended or ctx is done; then the rest
// are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	for c := range s.conns {
		// Each on its own: one whose client reads nothing may wait
		// to write its GOAWAY, and must not hold up the others.
		go c.shutdown()
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-s.ended:
		case <-time.After(100 * time.Millisecond):
			// A connection that ended between the count and the
			// wait signalled nobody: count again now and then.
		case <-ctx.Done():
			s.mu.Lock()
			for c := range s.conns {
				c.nc.Close()
			}
			s.mu.Unlock()
			return ctx.Err()
		}
	}
}

// goAwayFrames are a server's first frames refusing every stream: an empty
// SETTINGS frame (the server's preface), then GOAWAY with last stream 0
// and NO_ERROR, which tells the client that none of its requests was
// processed, so it may send them again on a new connection (RFC 9113,
// sections 3.4 and 6.8).
var goAwayFrames = []byte{
	0, 0, 0, 0x4, 0, 0, 0, 0, 0, // SETTINGS, empty
	0, 0, 8, 0x7, 0, 0, 0, 0, 0, // GOAWAY, 8 bytes of payload
	0, 0, 0, 0, // last stream ID 0
	0, 0, 0, 0, // NO_ERROR
}

// goAwayLinger bounds the wait for a refused client to close first.
const goAwayLinger = time.Second

// goAway refuses c, which arrived too late to be served, and closes it.
// It reads until the client closes (or goAwayLinger passes): closing with
// the client's bytes unread would reset the connection, and the client
// could lose the GOAWAY.
func goAway(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(goAwayLinger))
	if _, err := c.Write(goAwayFrames); err != nil {
		return
	}
	io.Copy(io.Discard, c)
}
