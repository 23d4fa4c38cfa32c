package logging

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Entry is what the access log records about one proxied request. The proxy
// fills one per request and may reuse it: Log copies everything it needs.
type Entry struct {
	// Time is when the request started.
	Time time.Time
	// Client is the TCP peer.
	Client netip.AddrPort
	// Method may alias a connection buffer; it is copied by Log.
	Method []byte
	// Path is the request target as received; it may alias a connection
	// buffer and is copied by Log.
	Path []byte
	// Proto is the protocol the client spoke ("HTTP/1.1", "HTTP/2.0").
	Proto string
	// TLS reports that the client connected over TLS.
	TLS bool
	// Status is the status code sent to the client.
	Status int
	// Backend is the name of the backend that answered, or "" if none did.
	Backend string
	// Pool is the pool that served the request, "" when relay answered
	// it without one (no route, a redirect, a refused path); Route is the
	// name of the route that matched, "" when none did.
	Pool, Route string
	// Duration is how long the request took.
	Duration time.Duration
	// BytesIn counts request body bytes read from the client.
	BytesIn int64
	// BytesOut counts response body bytes sent to the client.
	BytesOut int64
	// UserAgent and Referer are the client's User-Agent and Referer field
	// values, empty when it sent none. They may alias a connection buffer
	// and are copied by Log, at most MaxValueBytes of each (a longer one
	// is cut there and marked), so that a client cannot make a line huge.
	UserAgent, Referer []byte
	// RequestID is the request's id, sent to the backend and back to the
	// client as X-Request-Id; empty when relay gives requests no id. It is
	// copied by Log.
	RequestID []byte
	// TraceID is the request's trace id in hex (W3C Trace Context), empty
	// when tracing is off; a line leaves it out then. It is copied by Log.
	TraceID []byte
	// ClientCertSubject is the subject of the client's verified TLS
	// certificate (RFC 2253), empty without one; a line leaves it out
	// then. It is copied by Log, at most MaxValueBytes of it.
	ClientCertSubject []byte
	// UpstreamConnect is how long getting a connection to the backend
	// took for the attempt that answered: the dial (and TLS handshake) for
	// a new connection, 0 for a pooled one. Negative when no backend was
	// tried; a line leaves it out then.
	UpstreamConnect time.Duration
	// UpstreamResponse is how long the backend took to answer: from the
	// request (head and body) being sent to the final response head
	// arriving. Negative when no response head arrived; a line leaves it
	// out then.
	UpstreamResponse time.Duration
	// GRPCStatus is the grpc-status a gRPC response ended with ("0" for
	// OK), the backend's or relay's own; "" for a request that is not
	// gRPC or a response that carried none, which a line leaves out.
	GRPCStatus string
}

// MaxValueBytes bounds how much of a client's header value (Entry's
// UserAgent and Referer) a line holds; a longer value is cut here and
// followed by TruncatedMark.
const MaxValueBytes = 1024

// TruncatedMark follows a value cut at MaxValueBytes.
const TruncatedMark = "...[truncated]"

// bounded returns at most MaxValueBytes of v and whether it was cut.
func bounded(v []byte) ([]byte, bool) {
	if len(v) > MaxValueBytes {
		return v[:MaxValueBytes], true
	}
	return v, false
}

// Defaults for NewAccessLog.
const (
	// DefaultFlushSize is how much buffered log makes the writer flush early,
	// and the largest single Write it makes (up to one overlong line).
	DefaultFlushSize = 64 << 10
	// DefaultFlushInterval bounds how long a line waits in memory when
	// traffic is light.
	DefaultFlushInterval = 100 * time.Millisecond
	// DefaultMaxPending is how much unwritten log may pile up behind a slow
	// writer before new lines are dropped.
	DefaultMaxPending = 4 << 20
)

// lineOverhead bounds the bytes of a line besides its free-form strings:
// the field names (about 290), a time (35), a bracketed IPv6 address with
// port (49), four integers and three durations (at most 21 each) and two
// truncation marks (14 each). Only the drop check uses it, so generous is
// fine; the combined format's lines are shorter.
const lineOverhead = 600

// AccessLog writes one line per request, JSON or combined (Format), without ever making a request
// wait for I/O. Log formats into an in-memory buffer under a short lock; a
// background goroutine swaps that buffer for an empty one and writes it out
// when it passes the flush size or when the flush interval ticks. If the
// writer falls behind and the buffer reaches its cap, new lines are dropped
// and counted rather than held or waited for.
//
// A nil *AccessLog logs nothing and counts nothing: that is how the access
// log is turned off. Callers that would do extra work only to fill an Entry,
// such as reading the clock, can test for nil first.
type AccessLog struct {
	w             io.Writer
	flushSize     int
	flushInterval time.Duration
	maxPending    int

	mu     sync.Mutex
	buf    []byte // lines not yet handed to the writer
	lines  lineFormatter
	closed bool

	dropped atomic.Uint64
	kick    chan struct{} // buffered(1): Log asks for an early flush
	stop    chan struct{} // closed by Close
	done    chan struct{} // closed when the flusher has written everything
	once    sync.Once
	err     error // first write error; read only after done is closed
}

// AccessOption changes a setting of NewAccessLog.
type AccessOption func(*AccessLog)

// WithFormat sets the lines' format; JSON unless set.
func WithFormat(f Format) AccessOption {
	return func(a *AccessLog) { a.lines.format = f }
}

// WithFlushSize sets how many buffered bytes trigger an early flush; it is
// also the largest Write the access log makes. Values below 1 are ignored.
func WithFlushSize(n int) AccessOption {
	return func(a *AccessLog) {
		if n > 0 {
			a.flushSize = n
		}
	}
}

// WithFlushInterval sets the longest a line waits before being written when
// the flush size is not reached. Values below 1 are ignored.
func WithFlushInterval(d time.Duration) AccessOption {
	return func(a *AccessLog) {
		if d > 0 {
			a.flushInterval = d
		}
	}
}

// WithMaxPending sets how many unwritten bytes may wait before lines are
// dropped. Values below 1 are ignored.
func WithMaxPending(n int) AccessOption {
	return func(a *AccessLog) {
		if n > 0 {
			a.maxPending = n
		}
	}
}

// NewAccessLog starts an access log writing to w. w only ever sees whole
// lines, from one goroutine at a time. Close it to write what is buffered.
func NewAccessLog(w io.Writer, opts ...AccessOption) *AccessLog {
	a := &AccessLog{
		w:             w,
		flushSize:     DefaultFlushSize,
		flushInterval: DefaultFlushInterval,
		maxPending:    DefaultMaxPending,
		kick:          make(chan struct{}, 1),
		stop:          make(chan struct{}),
		done:          make(chan struct{}),
	}
	for _, o := range opts {
		o(a)
	}
	// Sized so that a steady stream of requests fits between two flushes
	// without the buffer having to grow.
	a.buf = make([]byte, 0, 2*a.flushSize)
	go a.run()
	return a
}

// Log records e. It never waits for the writer: if too much is already
// pending, or the log is closed, the line is dropped and counted instead.
// e and the slices it points to are not retained.
func (a *AccessLog) Log(e *Entry) {
	if a == nil {
		return
	}
	// Every byte of a free-form string escapes to at most six (\u00XX), so
	// this bounds the line without formatting it first.
	worst := lineOverhead + 6*(len(e.Method)+len(e.Path)+len(e.Backend)+len(e.Pool)+len(e.Route)+len(e.RequestID)+len(e.TraceID)+len(e.GRPCStatus)+
		min(len(e.UserAgent), MaxValueBytes)+min(len(e.Referer), MaxValueBytes)+min(len(e.ClientCertSubject), MaxValueBytes))
	a.mu.Lock()
	if a.closed || len(a.buf)+worst > a.maxPending {
		a.mu.Unlock()
		a.dropped.Add(1)
		return
	}
	before := len(a.buf)
	a.buf = a.lines.appendLine(a.buf, e)
	full := before < a.flushSize && len(a.buf) >= a.flushSize
	a.mu.Unlock()
	if full {
		// Only the append that crosses the threshold asks; the flusher
		// takes everything buffered by the time it wakes.
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
}

// Dropped returns how many lines were lost: dropped because the writer was
// too far behind or the log was closed, or lost in a failed write.
func (a *AccessLog) Dropped() uint64 {
	if a == nil {
		return 0
	}
	return a.dropped.Load()
}

// Close writes everything buffered, stops the background writer and returns
// the first write error seen, if any. It waits for the writer, however slow.
// Lines logged after Close are dropped. It does not close the underlying
// writer.
func (a *AccessLog) Close() error {
	if a == nil {
		return nil
	}
	a.once.Do(func() {
		a.mu.Lock()
		a.closed = true
		a.mu.Unlock()
		close(a.stop)
	})
	<-a.done
	return a.err
}

// run is the flusher goroutine. It owns out, the buffer being written, and
// trades it with Log's buffer under the lock, so neither waits for the other
// longer than a slice swap.
func (a *AccessLog) run() {
	defer close(a.done)
	tick := time.NewTicker(a.flushInterval)
	defer tick.Stop()
	out := make([]byte, 0, 2*a.flushSize)
	for {
		select {
		case <-a.kick:
		case <-tick.C:
		case <-a.stop:
			// Log no longer appends once closed is set, so one last swap
			// takes everything.
			a.flush(&out)
			return
		}
		a.flush(&out)
	}
}

// flush swaps the buffers and writes what Log had collected.
func (a *AccessLog) flush(out *[]byte) {
	a.mu.Lock()
	pending := a.buf
	a.buf = (*out)[:0]
	a.mu.Unlock()
	a.write(pending)
	*out = pending
}

// write hands p to the writer in pieces of at most flushSize that end on a
// line boundary, so that a rotating file never receives a half line and
// never a write larger than its size limit.
func (a *AccessLog) write(p []byte) {
	for len(p) > 0 {
		n := len(p)
		if n > a.flushSize {
			n = bytes.LastIndexByte(p[:a.flushSize], '\n') + 1
			if n == 0 {
				// One line longer than a piece: send it alone.
				n = bytes.IndexByte(p, '\n') + 1
			}
		}
		if _, err := a.w.Write(p[:n]); err != nil {
			a.dropped.Add(uint64(bytes.Count(p[:n], []byte{'\n'})))
			if a.err == nil {
				a.err = fmt.Errorf("access log: write: %w", err)
			}
		}
		p = p[n:]
	}
}
