package h2up

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/hblock"
)

// Defaults of Options, and the protocol's fixed values relay works with.
const (
	defaultStreamWindow   = 256 << 10
	defaultMaxHeaderBytes = 64 << 10
	defaultMaxStreams     = 100
	defaultWriteTimeout   = 10 * time.Second
	// assumedStreams is the backend's stream limit until its SETTINGS
	// say otherwise.
	assumedStreams = 100
	maxWindow      = 1<<31 - 1
	initialWindow  = 65535
	maxStreamID    = 1<<31 - 1
	// maxFrameRead is the largest frame relay accepts: the default, since
	// relay advertises no other.
	maxFrameRead = 16384
	// windowUpdateAt is how many consumed bytes wait before their window
	// is given back (or half the window, if less): a body costs a
	// WINDOW_UPDATE per 32 KiB rather than one per frame or read.
	windowUpdateAt  = 32 << 10
	readBufferSize  = 16384
	writeBufferSize = 16384
	// lingerBytes and lingerTime bound what relay reads from a backend
	// after a GOAWAY for its error, so the GOAWAY is not lost to a reset
	// of the connection; a flood is cut off, not drained.
	lingerBytes = 64 << 10
	lingerTime  = time.Second
)

var (
	errClosedByRelay = errors.New("h2up: connection closed by relay")
	errNotUsable     = fmt.Errorf("h2up: the connection is closing: %w", ErrRefused)
	errGoneAway      = fmt.Errorf("h2up: the backend's GOAWAY left the stream unprocessed: %w", ErrRefused)
	errRefusedStream = fmt.Errorf("h2up: the backend refused the stream (REFUSED_STREAM): %w", ErrRefused)
	errPingTimeout   = errors.New("h2up: the backend did not answer a PING in time")
	errBackendGoAway = errors.New("h2up: the backend sent GOAWAY")
	errDraining      = errors.New("h2up: the connection is draining")
	errIDsUsedUp     = errors.New("h2up: the connection's stream ids are used up")
)

// Conn is one HTTP/2 connection to a backend.
type Conn struct {
	nc   net.Conn
	o    Options
	log  *slog.Logger
	done chan struct{}
	// settled is closed once the backend's first SETTINGS are applied.
	settled     chan struct{}
	settledOnce sync.Once
	// connWindow is the receive window relay keeps open on the
	// connection; connUpdateAt and streamUpdateAt when consumed window is
	// given back.
	connWindow                   int64
	connUpdateAt, streamUpdateAt int64

	// The reading goroutine's only (read.go).
	readAt      int64 // when the last read from the socket returned (clock)
	br          *bufio.Reader
	in          blockReader
	fr          *http2.Framer
	hr          *hblock.Reader // reads fr, header blocks whole
	sawSettings bool
	ab          budget

	// The write side, under wmu (write.go).
	wmu     sync.Mutex
	writers atomic.Int32 // goroutines waiting for wmu: the last one flushes
	bw      *bufio.Writer
	wfr     *http2.Framer
	enc     *hblock.Encoder
	werr    error         // the first write error: nothing more is written
	wdl     time.Duration // the socket's write deadline (clock)
	lockAt  int64         // when wmu was last taken (clock)
	// peerFrame is the largest frame the backend accepts.
	peerFrame atomic.Uint32
	// sent counts the HEADERS and DATA frames written, which pay for the
	// backend's control frames (abuse.go).
	sent atomic.Uint64

	// Streams, windows and the connection's state, under mu.
	mu      sync.Mutex
	streams map[uint32]*Stream // streams whose head went out
	open    int                // places taken: streams opened and not closed
	peerMax uint32             // the backend's SETTINGS_MAX_CONCURRENT_STREAMS
	nextID  uint32
	// sendWin is what relay may still send on the connection; peerInit
	// the backend's SETTINGS_INITIAL_WINDOW_SIZE.
	sendWin, peerInit int64
	// recvWin is what the backend may still send on the connection;
	// unacked the part of connWindow consumed and not yet given back.
	recvWin, unacked int64
	// granted and dataOut count the connection's send window the backend
	// gave and the DATA bytes relay wrote: sendWin is always
	// initialWindow + granted - dataOut, less what writers took and have
	// not yet written or given back.
	granted, dataOut int64
	waiters          []*Stream // writers waiting for connection window
	free             [][]byte  // body buffers of closed streams (flow.go)
	spare            []*Stream // closed streams, kept for the next Open
	goneAway         bool      // the backend sent GOAWAY
	lastID           uint32    // its last stream id
	draining         bool      // Drain was called
	closing          bool      // the connection is ending
	cause            error     // why
	lost             error     // what its streams fail with once it ended
	idleSince        time.Time
	pingOut          bool // a PING awaits its ACK
	pingData         [8]byte
	pingSeq          uint64
	pingTimer        *time.Timer
}

func (o Options) withDefaults() Options {
	if o.StreamWindow <= 0 {
		o.StreamWindow = defaultStreamWindow
	}
	if o.MaxHeaderBytes == 0 {
		o.MaxHeaderBytes = defaultMaxHeaderBytes
	}
	if o.MaxStreams == 0 {
		o.MaxStreams = defaultMaxStreams
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultWriteTimeout
	}
	return o
}

// Start begins HTTP/2 on c, a connection whose TLS handshake, if any, is
// done: it writes the client preface, relay's SETTINGS and a connection
// WINDOW_UPDATE, and starts the goroutine that reads the backend's frames.
// It does not wait for the backend's SETTINGS.
func Start(nc net.Conn, o Options) (*Conn, error) {
	o = o.withDefaults()
	c := &Conn{nc: nc, o: o, log: o.Logger, done: make(chan struct{}), settled: make(chan struct{})}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	// The connection's window covers every stream's: each stream's
	// window bounds what relay holds, and the connection's is given back
	// as DATA arrives, so one stream whose reader stops never stalls the
	// others.
	c.connWindow = min(int64(o.StreamWindow)*int64(o.MaxStreams), maxWindow)
	c.connWindow = max(c.connWindow, initialWindow)
	c.connUpdateAt = min(windowUpdateAt, c.connWindow/2)
	c.streamUpdateAt = max(min(windowUpdateAt, int64(o.StreamWindow)/2), 1)
	c.br = bufio.NewReaderSize(clockReader{c}, readBufferSize)
	c.in = blockReader{r: c.br, limit: 2*int(o.MaxHeaderBytes) + maxFrameRead}
	c.fr = http2.NewFramer(nil, &c.in)
	c.fr.SetMaxReadFrameSize(maxFrameRead)
	c.fr.MaxHeaderListSize = o.MaxHeaderBytes
	c.hr = hblock.NewReader(c.fr, &c.in)
	c.fr.SetReuseFrames()
	c.bw = bufio.NewWriterSize(nc, writeBufferSize)
	c.wfr = http2.NewFramer(c.bw, nil)
	c.enc = hblock.NewEncoder()
	c.peerFrame.Store(16384)
	c.streams = make(map[uint32]*Stream)
	c.free = make([][]byte, 0, freeBuffers)
	c.peerMax = assumedStreams
	c.nextID = 1
	c.sendWin, c.peerInit = initialWindow, initialWindow
	c.recvWin = c.connWindow
	c.idleSince = time.Now()
	c.ab.init(c.idleSince)

	c.lockWrite()
	c.bw.WriteString(http2.ClientPreface)
	c.wfr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: uint32(o.StreamWindow)},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: o.MaxHeaderBytes},
	)
	if c.connWindow > initialWindow {
		c.wfr.WriteWindowUpdate(0, uint32(c.connWindow-initialWindow))
	}
	if err := c.unlockWriteNow(); err != nil {
		nc.Close()
		return nil, fmt.Errorf("h2up: starting HTTP/2 with %s: %w", o.Name, err)
	}
	go c.run()
	return c, nil
}

// Open opens a stream for one request, or returns nil when the connection
// takes no more: it is closed or draining (a GOAWAY either way), or has as
// many streams open as the backend's SETTINGS_MAX_CONCURRENT_STREAMS and
// Options.MaxStreams allow. Every stream opened must be closed
// (Stream.Close).
func (c *Conn) Open() *Stream {
	c.mu.Lock()
	if !c.usable() || c.open >= int(min(c.peerMax, c.o.MaxStreams)) {
		c.mu.Unlock()
		return nil
	}
	c.open++
	var s *Stream
	if n := len(c.spare); n > 0 {
		s = c.spare[n-1]
		c.spare[n-1] = nil
		c.spare = c.spare[:n-1]
	}
	c.mu.Unlock()
	if s == nil {
		return newStream(c)
	}
	s.last.Store(clock())
	return s
}

// usable reports whether new streams may start. mu is held.
func (c *Conn) usable() bool {
	return !c.closing && !c.draining && !c.goneAway && c.nextID <= maxStreamID
}

// Streams returns the number of streams open on the connection.
func (c *Conn) Streams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open
}

// Usable reports whether the connection may open new streams at all:
// neither closed nor draining. A connection at its stream limit is usable.
func (c *Conn) Usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.usable()
}

// IdleSince returns when the connection's last stream ended (or when the
// connection started, if none ever opened); zero while a stream is open.
func (c *Conn) IdleSince() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open > 0 {
		return time.Time{}
	}
	return c.idleSince
}

// Drain stops the connection taking new streams and closes it, with a
// GOAWAY, once its open streams have ended.
func (c *Conn) Drain() {
	c.mu.Lock()
	c.draining = true
	now := c.open == 0
	c.mu.Unlock()
	if now {
		c.Close()
	}
}

// Close closes the connection now, with a GOAWAY; open streams end with an
// error.
func (c *Conn) Close() { c.closeWith(errClosedByRelay, http2.ErrCodeNo, false) }

// closeWith ends the connection for cause, sending GOAWAY with code
// first. With linger (the reading goroutine only), it reads a little of
// what the backend still sends before closing, so that the GOAWAY
// reaches it rather than be lost to a reset of the connection.
func (c *Conn) closeWith(cause error, code http2.ErrCode, linger bool) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing, c.cause = true, cause
	c.mu.Unlock()
	c.lockWrite()
	c.wfr.WriteGoAway(0, code, nil)
	c.unlockWriteNow()
	if linger {
		// The streams fail now, not once the backend has had its time to
		// take the GOAWAY: their requests may go elsewhere at once.
		c.mu.Lock()
		c.failStreams(cause)
		c.mu.Unlock()
		c.nc.SetReadDeadline(time.Now().Add(lingerTime))
		io.CopyN(io.Discard, c.br, lingerBytes)
	}
	c.nc.Close()
}

// Done is closed once the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Settled is closed once the backend's first SETTINGS have been applied:
// from then on Open keeps to the backend's stream limit. Until then it
// assumes 100 streams.
func (c *Conn) Settled() <-chan struct{} { return c.settled }

// Err returns why the connection takes no new stream for good, or nil
// while it takes them (at its stream limit or not): the connection's end
// (the backend closed it or broke the protocol, a write failed, relay
// closed it), the backend's GOAWAY, or relay's Drain. A new connection
// whose Open returns nil says here why it took no stream.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.closing && c.cause != errClosedByRelay:
		return c.cause
	case c.goneAway:
		// relay closes a connection the backend sent GOAWAY on once it
		// has no stream: the GOAWAY is the reason.
		return errBackendGoAway
	case c.closing:
		return c.cause
	case c.draining:
		return errDraining
	case c.nextID > maxStreamID:
		return errIDsUsedUp
	}
	return nil
}

// MaxStreams returns the most streams the connection takes at once: the
// backend's SETTINGS_MAX_CONCURRENT_STREAMS (100 until its SETTINGS
// come), at most Options.MaxStreams.
func (c *Conn) MaxStreams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(min(c.peerMax, c.o.MaxStreams))
}

// finish ends the connection once reading has: every stream still open
// fails, and Done is closed.
func (c *Conn) finish(readErr error) {
	c.mu.Lock()
	c.closing = true
	cause := c.cause
	if cause == nil {
		cause = readErr
		if errors.Is(cause, io.EOF) {
			cause = io.ErrUnexpectedEOF
		}
		c.cause = cause
	}
	c.failStreams(cause)
	if c.pingTimer != nil {
		c.pingTimer.Stop()
	}
	c.mu.Unlock()
	// The streams fail first: closing may wait a while for bytes the
	// backend is not taking (rawio.BatchConn.Close).
	c.nc.Close()
	if cause != errClosedByRelay && !errors.Is(cause, io.ErrUnexpectedEOF) {
		c.log.Debug("HTTP/2 connection to backend ended", "backend", c.o.Name, "err", cause.Error())
	}
	close(c.done)
}

// failStreams fails every open stream, the connection being lost for
// cause, and wakes their sides. c.mu is held.
func (c *Conn) failStreams(cause error) {
	c.lost = fmt.Errorf("h2up: connection to %s lost: %w", c.o.Name, cause)
	for _, s := range c.streams {
		if s.err == nil {
			s.err = c.lost
		}
		s.wake()
	}
	for _, s := range c.waiters {
		s.waiting = false
	}
	c.waiters = c.waiters[:0]
}

// warn writes a warning the backend caused, through o.Warnings when set.
func (c *Conn) warn(msg string, args ...any) {
	if c.o.Warnings != nil {
		c.o.Warnings.Warn(msg, args...)
		return
	}
	c.log.Warn(msg, args...)
}

// clockReader reads the connection, noting when each read returned: the
// frames one read brings are stamped with its time, rather than each
// reading the clock.
type clockReader struct{ c *Conn }

func (r clockReader) Read(p []byte) (int, error) {
	n, err := r.c.nc.Read(p)
	r.c.readAt = clock()
	return n, err
}

// epoch is where the connections' clock readings start.
var epoch = time.Now()

// clock returns the time since epoch, in nanoseconds. It reads the
// monotonic clock alone, at half the cost of time.Now, which reads the
// wall clock too; stamping frames and writes it is read often.
func clock() int64 { return int64(time.Since(epoch)) }
