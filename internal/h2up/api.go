// Package h2up speaks HTTP/2 to backends: one client connection that many
// requests share as streams, flow control both ways, SETTINGS, PING and
// GOAWAY, and bounds on everything a backend can make relay hold.
//
// It knows nothing of pools or balancing: the core keeps connections per
// backend, opens a stream for each request it sends, and decides what a
// refused stream means.
package h2up

import (
	"errors"
	"log/slog"
	"net"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Options configure a connection; a zero field takes its default.
type Options struct {
	// Name names the backend in log lines.
	Name string
	// StreamWindow is the receive window relay gives each stream: the
	// most response body bytes relay holds for one stream that its
	// reader has not taken. Default 256 KiB.
	StreamWindow int32
	// MaxHeaderBytes bounds one decoded response head or trailer block
	// (advertised as SETTINGS_MAX_HEADER_LIST_SIZE). Default 64 KiB.
	MaxHeaderBytes uint32
	// MaxStreams caps the streams relay opens on the connection, whatever
	// the backend's SETTINGS_MAX_CONCURRENT_STREAMS allows. Default 100.
	MaxStreams uint32
	// WriteTimeout bounds each write to the socket: a backend that stops
	// reading loses the connection rather than stall its streams for
	// ever. Default 10 s.
	WriteTimeout time.Duration
	// Logger receives the connection's events (a GOAWAY, abuse); nil
	// discards them.
	Logger *slog.Logger
}

// ErrRefused says the backend did not process the request: it refused the
// stream (REFUSED_STREAM), its GOAWAY's last stream id is below the
// stream's, or the connection was lost or closing before the head went
// out. Such a request may be sent again, to any backend.
var ErrRefused = errors.New("stream refused: the backend did not process it")

// StreamError is a reset of the stream by the backend (RST_STREAM) with a
// code other than REFUSED_STREAM.
type StreamError struct{ Code http2.ErrCode }

func (e StreamError) Error() string { return "stream reset by the backend: " + e.Code.String() }

// Head is a response head: the status and the fields, pseudo-fields left
// out, names in lower case. ContentLength is the content-length field's
// value, -1 without one. End says the stream ended with the head: no body
// follows (and the fields may carry what would be trailers, as gRPC's
// trailers-only responses do).
type Head struct {
	Status        int
	Fields        []hpack.HeaderField
	ContentLength int64
	End           bool
}

// Conn is one HTTP/2 connection to a backend.
type Conn struct{}

// Start begins HTTP/2 on c, a connection whose TLS handshake, if any, is
// done: it writes the client preface, relay's SETTINGS and a connection
// WINDOW_UPDATE, and starts the goroutine that reads the backend's frames.
// It does not wait for the backend's SETTINGS.
func Start(c net.Conn, o Options) (*Conn, error) { panic("h2up: not built yet") }

// Open opens a stream for one request, or returns nil when the connection
// takes no more: it is closed or draining (a GOAWAY either way), or has as
// many streams open as the backend's SETTINGS_MAX_CONCURRENT_STREAMS and
// Options.MaxStreams allow. Every stream opened must be closed
// (Stream.Close).
func (c *Conn) Open() *Stream { panic("h2up: not built yet") }

// Streams returns the number of streams open on the connection.
func (c *Conn) Streams() int { panic("h2up: not built yet") }

// Usable reports whether the connection may open new streams at all:
// neither closed nor draining. A connection at its stream limit is usable.
func (c *Conn) Usable() bool { panic("h2up: not built yet") }

// IdleSince returns when the connection's last stream ended (or when the
// connection started, if none ever opened); zero while a stream is open.
func (c *Conn) IdleSince() time.Time { panic("h2up: not built yet") }

// Ping sends a PING; if its ACK does not come within timeout, the
// connection is closed.
func (c *Conn) Ping(timeout time.Duration) { panic("h2up: not built yet") }

// Drain stops the connection taking new streams and closes it, with a
// GOAWAY, once its open streams have ended.
func (c *Conn) Drain() { panic("h2up: not built yet") }

// Close closes the connection now, with a GOAWAY; open streams end with an
// error.
func (c *Conn) Close() { panic("h2up: not built yet") }

// Done is closed once the connection has ended.
func (c *Conn) Done() <-chan struct{} { panic("h2up: not built yet") }

// Stream is one request and its response on a Conn. Its write side
// (WriteHead, Write, CloseWrite) and its read side (ReadHead, Read,
// Trailers) may be used from two goroutines at once; each side from one.
type Stream struct{}

// WriteHead sends the request head. fields start with the pseudo-fields
// :method, :scheme, :authority (optional) and :path, then the regular
// fields with lower-case names; end says no body follows. The stream's
// id is assigned here, in the order heads are written. An error wrapping
// ErrRefused says nothing was sent.
func (s *Stream) WriteHead(fields []hpack.HeaderField, end bool) error {
	panic("h2up: not built yet")
}

// Write sends body bytes as DATA frames within the backend's flow-control
// windows, waiting for credit until the write deadline.
func (s *Stream) Write(p []byte) (int, error) { panic("h2up: not built yet") }

// CloseWrite ends the request body: with trailers as a HEADERS frame, or
// with an empty DATA frame when there are none.
func (s *Stream) CloseWrite(trailers []hpack.HeaderField) error { panic("h2up: not built yet") }

// SetWriteDeadline bounds the waits of Write and CloseWrite; one past it
// fails with an error wrapping os.ErrDeadlineExceeded.
func (s *Stream) SetWriteDeadline(t time.Time) { panic("h2up: not built yet") }

// SetReadDeadline bounds the waits of ReadHead and Read the same way.
func (s *Stream) SetReadDeadline(t time.Time) { panic("h2up: not built yet") }

// ReadHead waits for the next response head; informational (1xx) heads
// come first when the backend sends them.
func (s *Stream) ReadHead() (Head, error) { panic("h2up: not built yet") }

// Read reads response body bytes, io.EOF after the end of the stream.
// Bytes read are given back to the backend as window.
func (s *Stream) Read(p []byte) (int, error) { panic("h2up: not built yet") }

// Buffered returns how many body bytes Read can return without waiting.
func (s *Stream) Buffered() int { panic("h2up: not built yet") }

// Trailers returns the trailer fields, once Read has returned io.EOF; nil
// when the response had none.
func (s *Stream) Trailers() []hpack.HeaderField { panic("h2up: not built yet") }

// LastActive returns when the stream last moved: a frame of it read, or
// body bytes written.
func (s *Stream) LastActive() time.Time { panic("h2up: not built yet") }

// Close ends the stream: one that has not ended both ways is reset
// (RST_STREAM CANCEL). Its place on the connection is free again. Close
// is called once per Open, after which the stream is not used.
func (s *Stream) Close() { panic("h2up: not built yet") }
