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
	"fmt"
	"log/slog"
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
	// Warnings, when not nil, takes the warnings a backend's misbehaviour
	// causes in place of Logger, to bound them: a backend that breaks
	// the protocol on every connection relay opens to it must not flood
	// the log (logging.Limited).
	Warnings Warner
}

// Warner writes warnings, as logging.Limited does.
type Warner interface {
	Warn(msg string, args ...any)
}

// ErrRefused says the backend did not process the request: it refused the
// stream (REFUSED_STREAM), its GOAWAY's last stream id is below the
// stream's, or the connection was lost or closing before the head went
// out. Such a request may be sent again, to any backend.
var ErrRefused = errors.New("stream refused: the backend did not process it")

// ErrOverLimit says the request head did not go out because the backend
// lowered its SETTINGS_MAX_CONCURRENT_STREAMS after the stream was opened
// and the connection has as many streams as the new limit allows. Nothing
// was sent: the request may take a stream elsewhere, on this backend too.
var ErrOverLimit = fmt.Errorf("h2up: the backend lowered its stream limit before the request head went out: %w", ErrRefused)

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
