package handler

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Limits bound what one HTTP/2 client may ask of relay.
type Limits struct {
	// MaxConcurrentStreams caps the streams a client may have open at
	// once; Go's server also caps the handlers a client can keep busy by
	// resetting streams (Rapid Reset).
	MaxConcurrentStreams int
	// MaxHeaderBytes caps a request's header list, CONTINUATION frames
	// included.
	MaxHeaderBytes int
	// IdleTimeout closes a connection with no open stream, and one whose
	// client takes no bytes or answers no PING for that long.
	IdleTimeout time.Duration
	// HeaderTimeout bounds the wait for a connection's preface.
	HeaderTimeout time.Duration
}

// Server is Go's HTTP/2 server over a Handler, for connections another
// front door accepted and handed over: TLS connections that chose h2 by
// ALPN, and cleartext ones that opened with the HTTP/2 preface (h2c).
type Server struct {
	hs    *http.Server
	ln    *handoff
	done  chan struct{}
	mu    sync.Mutex
	conns map[net.Conn]*handed
	// stopping says a Shutdown is under way (see state).
	stopping bool
}

// handed is a connection handed over and not yet ended.
type handed struct {
	closed  func() // run when it ends
	serving bool   // it has reported serving (see state)
}

// cancelled is a context already done.
var cancelled = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// NewServer returns a Server forwarding every request through h. log
// receives the HTTP/2 server's own complaints (bad frames, protocol
// errors) at debug level.
func NewServer(h *Handler, lim Limits, log *slog.Logger) *Server {
	s := &Server{ln: newHandoff(), done: make(chan struct{}), conns: make(map[net.Conn]*handed)}
	var protos http.Protocols
	protos.SetHTTP2(true)
	protos.SetUnencryptedHTTP2(true)
	s.hs = &http.Server{
		Handler:           h,
		Protocols:         &protos,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		IdleTimeout:       lim.IdleTimeout,
		ReadHeaderTimeout: lim.HeaderTimeout,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: lim.MaxConcurrentStreams,
			// A client that goes silent with streams open is found
			// and closed within IdleTimeout and a PING's 15 s. One
			// that stops taking bytes is cut off by the socket
			// itself (rawio.Conn's WriteWait, IdleTimeout, under the
			// rawio.BatchConn the connection arrives on): Go's
			// WriteByteTimeout would only time writes that append
			// to the batch.
			SendPingTimeout: lim.IdleTimeout,
		},
		ConnState: s.state,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return h.withPeer(withResets(log)(ctx, c), c)
		},
	}
	if log != nil {
		s.hs.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	}
	go func() {
		defer close(s.done)
		if err := s.hs.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Error("the HTTP/2 server stopped", "err", err.Error())
		}
	}()
	return s
}

// ServeConn serves c, whose TLS handshake (if any) is done, and calls
// closed once c has ended. After Shutdown it sends c GOAWAY and closes it.
func (s *Server) ServeConn(c net.Conn, closed func()) {
	s.mu.Lock()
	s.conns[c] = &handed{closed: closed}
	s.mu.Unlock()
	if !s.ln.give(c) {
		goAway(c)
		s.state(c, http.StateClosed)
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

// state runs a connection's callback when net/http reports it closed.
//
// It also closes a gap in Shutdown: Go's HTTP/2 server sends GOAWAY to the
// connections it has registered when Shutdown starts, and a connection
// handed over just before may register only after. Its first report of
// serving (Active, after its preface) comes after it registered, so a
// Shutdown started again then reaches it.
func (s *Server) state(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateClosed, http.StateHijacked:
	case http.StateActive:
		s.mu.Lock()
		h := s.conns[c]
		first := h != nil && !h.serving
		if first {
			h.serving = true
		}
		stopping := s.stopping
		s.mu.Unlock()
		if first && stopping {
			// One pass: a cancelled context makes Shutdown send
			// GOAWAY to every registered connection and return,
			// instead of waiting for them beside the first call.
			go s.hs.Shutdown(cancelled)
		}
		return
	default:
		return
	}
	s.mu.Lock()
	h := s.conns[c]
	delete(s.conns, c)
	s.mu.Unlock()
	if h != nil {
		h.closed()
	}
}

// Shutdown sends every connection GOAWAY, lets open streams finish and
// returns when all connections have ended or ctx is done; then the rest
// are closed.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	err := s.hs.Shutdown(ctx)
	if err != nil {
		s.hs.Close()
	}
	<-s.done
	return err
}

// handoff is a net.Listener whose connections are handed to it.
type handoff struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newHandoff() *handoff {
	return &handoff{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *handoff) give(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *handoff) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *handoff) Addr() net.Addr { return handoffAddr{} }

type handoffAddr struct{}

func (handoffAddr) Network() string { return "handoff" }
func (handoffAddr) String() string  { return "handoff" }
