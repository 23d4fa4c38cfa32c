package h2up

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

var (
	errReadTimeout   = fmt.Errorf("h2up: waiting for the backend's response: %w", os.ErrDeadlineExceeded)
	errWriteTimeout  = fmt.Errorf("h2up: waiting for the backend's flow-control window: %w", os.ErrDeadlineExceeded)
	errNoHead        = errors.New("h2up: the request head was not written")
	errHeadTwice     = errors.New("h2up: the request head was already written")
	errWriteClosed   = errors.New("h2up: the request body was already ended")
	errStreamClosing = errors.New("h2up: the stream was closed")
	errWriteAborted  = errors.New("h2up: the request body was abandoned (AbortWrite)")
)

// Stream is one request and its response on a Conn. Its write side
// (WriteHead, Write, CloseWrite) and its read side (ReadHead, Read,
// Trailers) may be used from two goroutines at once; each side from one.
type Stream struct {
	c  *Conn
	id uint32 // assigned by WriteHead

	// Under c.mu.
	headed     bool // the request head went out: the stream has its id
	localDone  bool // relay's END_STREAM went out
	remoteDone bool // the backend's END_STREAM came
	final      bool // the final (non-1xx) response head came
	reset      bool // reset, by either side, or refused: no frame goes out for it
	closed     bool // Close was called
	wabort     bool // AbortWrite was called
	waiting    bool // in c.waiters
	headReq    bool // the request is a HEAD: its response has no content
	interim    int  // the informational heads that came (maxInterim)
	// content is the body length the final response head promises (its
	// content-length; 0 when it may have none), -1 when it promises none;
	// got the DATA payload bytes that came.
	content, got int64
	// sendWin is what relay may still send on the stream; recvWin what
	// the backend may; unacked the body bytes read (and padding) whose
	// window is not yet given back.
	sendWin, recvWin, unacked int64
	buf                       []byte // body bytes not yet read, from off
	off                       int
	heads                     []Head // heads not yet read, from hoff
	hoff                      int
	headArr                   [2]Head // heads' first array: most responses have one or two
	trailers                  []hpack.HeaderField
	// fields holds the fields of the heads and trailers that came, which
	// the frames they came in do not keep (keepFields); the first used
	// of them are those of informational heads already read (dropUsed).
	fields []hpack.HeaderField
	used   int
	err    error // why the stream failed, for both sides
	// rdl and wdl are the sides' deadlines (zero: none); rwatch and
	// wwatch, when not 0, bound them to that long after the side's next
	// wait begins (due).
	rdl, wdl       time.Time
	rwatch, wwatch time.Duration

	// rwake and wwake wake the reader and the writer when the stream's
	// state changes; each holds at most one wakeup, so none is lost.
	rwake, wwake chan struct{}
	// rt and wt wake them at their deadlines, set to go off at rAt and
	// wAt (zero: not set); under c.mu (arm).
	rt, wt   *time.Timer
	rAt, wAt time.Time
	last     atomic.Int64
	// held says the writer holds the connection's buffer (Hold); the
	// writer's goroutine only.
	held bool
	// rwaiting and wwaiting say a side waits for a wakeup (await); under
	// c.mu. A stream closed with neither is kept for the connection's
	// next Open.
	rwaiting, wwaiting bool
}

// keepFields copies fs, fields of a frame the connection reuses for its
// next header block, into the stream's own. The copies of earlier heads
// stay as they are until the caller is done with them (dropUsed). c.mu
// is held.
func (s *Stream) keepFields(fs []hpack.HeaderField) []hpack.HeaderField {
	start := len(s.fields)
	s.fields = append(s.fields, fs...)
	return s.fields[start:len(s.fields):len(s.fields)]
}

// spareBuffer is the largest body buffer a stream kept for reuse keeps;
// a larger one goes back to the connection (putBuffer).
const spareBuffer = 4 << 10

// keep readies s, closed with no side waiting, for the next Open, and
// reports whether it did: its wakeup channels, emptied, its timers and
// its buffers stay with it. A connection keeps as many closed streams as
// it may have open (Options.MaxStreams), so that a busy one allocates
// none. c.mu is held.
func (c *Conn) keep(s *Stream, buf []byte) bool {
	if len(c.spare) >= int(c.o.MaxStreams) {
		return false
	}
	if cap(buf) > spareBuffer {
		c.putBuffer(buf)
		buf = nil
	}
	rwake, wwake, rt, wt, fields := s.rwake, s.wwake, s.rt, s.wt, s.fields
	select {
	case <-rwake:
	default:
	}
	select {
	case <-wwake:
	default:
	}
	clear(fields)
	*s = Stream{c: c, rwake: rwake, wwake: wwake, rt: rt, wt: wt, content: -1, fields: fields[:0], buf: buf[:0]}
	s.heads = s.headArr[:0]
	c.spare = append(c.spare, s)
	return true
}

func newStream(c *Conn) *Stream {
	s := &Stream{c: c, rwake: make(chan struct{}, 1), wwake: make(chan struct{}, 1)}
	s.heads = s.headArr[:0]
	s.content = -1
	s.last.Store(clock())
	return s
}

// wake wakes both sides. c.mu is held.
func (s *Stream) wake() {
	s.wakeRead()
	s.wakeWrite()
}

func (s *Stream) wakeRead() {
	select {
	case s.rwake <- struct{}{}:
	default:
	}
}

func (s *Stream) wakeWrite() {
	select {
	case s.wwake <- struct{}{}:
	default:
	}
}

// awaitRead waits, without c.mu, for a wakeup of the read side, which
// its deadline's timer gives too; c.mu is held on entry and on return.
func (s *Stream) awaitRead() {
	s.arm(false)
	s.rwaiting = true
	s.c.mu.Unlock()
	<-s.rwake
	s.c.mu.Lock()
	s.rwaiting = false
}

// arm sees that the timer of a side (write: the write side) goes off by
// its deadline. It is moved only when the deadline comes before the time
// it is set for: the usual wait, for a deadline renewed a little later
// each time, costs no timer operation, and the timer going off early
// only makes the side look at its deadline and arm it again. c.mu is
// held.
func (s *Stream) arm(write bool) {
	tp, at, dl := &s.rt, &s.rAt, s.rdl
	if write {
		tp, at, dl = &s.wt, &s.wAt, s.wdl
	}
	if dl.IsZero() || !at.IsZero() && !dl.Before(*at) {
		return
	}
	*at = dl
	d := time.Until(dl)
	if *tp != nil {
		(*tp).Reset(d)
		return
	}
	// The stream outlives its uses (Conn.keep), its connection with it.
	c := s.c
	*tp = time.AfterFunc(d, func() { c.alarm(s, write) })
}

// alarm wakes a side of s whose timer went off.
func (c *Conn) alarm(s *Stream, write bool) {
	c.mu.Lock()
	if write {
		s.wAt = time.Time{}
		if s.wwaiting {
			s.wakeWrite()
		}
	} else {
		s.rAt = time.Time{}
		if s.rwaiting {
			s.wakeRead()
		}
	}
	c.mu.Unlock()
}

// due reports whether a side's deadline has passed, as it is about to
// wait; the part of the deadline counted from the wait's start is fixed
// now. Only a wait reads the clock: a read that finds its answer there,
// a write that finds window, costs none. c.mu is held.
func (s *Stream) due(write bool) bool {
	dl, watch := &s.rdl, &s.rwatch
	if write {
		dl, watch = &s.wdl, &s.wwatch
	}
	if dl.IsZero() && *watch == 0 {
		return false
	}
	now := epoch.Add(time.Duration(clock()))
	if *watch > 0 {
		if w := now.Add(*watch); dl.IsZero() || w.Before(*dl) {
			*dl = w
		}
		*watch = 0
	}
	return !now.Before(*dl)
}

// wrote notes that the stream's writer wrote, at the time it took the
// write side; wmu is held.
func (s *Stream) wrote() { s.last.Store(s.c.lockAt) }

// WriteHead sends the request head. fields start with the pseudo-fields
// :method, :scheme, :authority (optional) and :path, then the regular
// fields with lower-case names; end says no body follows. The stream's
// id is assigned here, in the order heads are written. An error wrapping
// ErrRefused says nothing was sent.
func (s *Stream) WriteHead(fields []hpack.HeaderField, end bool) error {
	c := s.c
	// The id is taken and the HEADERS written under the one write lock,
	// so ids go out in increasing order, as RFC 9113 5.1.1 requires.
	c.lockWrite()
	c.mu.Lock()
	switch {
	case s.headed:
		c.mu.Unlock()
		c.unlockWrite()
		return errHeadTwice
	case !c.usable() || c.werr != nil:
		c.mu.Unlock()
		c.unlockWrite()
		return errNotUsable
	case len(c.streams) >= int(min(c.peerMax, c.o.MaxStreams)):
		// Open counted the place against the backend's limit then; its
		// SETTINGS have lowered it since, and the ACK went out, so a
		// HEADERS now would open a stream over it (RFC 9113 5.1.2).
		c.mu.Unlock()
		c.unlockWrite()
		return ErrOverLimit
	}
	s.id = c.nextID
	c.nextID += 2
	s.headed, s.localDone = true, end
	s.headReq = len(fields) > 0 && fields[0].Name == ":method" && fields[0].Value == "HEAD"
	s.sendWin, s.recvWin = c.peerInit, int64(c.o.StreamWindow)
	c.streams[s.id] = s
	c.mu.Unlock()
	c.writeBlock(s.id, fields, end, false)
	s.wrote()
	err := c.unlockWrite()
	if errors.Is(err, net.ErrClosed) {
		// The reading goroutine closed the connection, the backend having
		// closed its end, between the check above and the write: nothing
		// of the head went out.
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	return err
}

// Write sends body bytes as DATA frames within the backend's flow-control
// windows, waiting for credit until the write deadline.
func (s *Stream) Write(p []byte) (int, error) {
	c := s.c
	done := 0
	for len(p) > 0 {
		n, err := s.take(len(p))
		if err != nil {
			return done, err
		}
		if err := s.lockFor(n); err != nil {
			return done, err
		}
		c.wfr.WriteData(s.id, false, p[:n])
		c.sent.Add(1)
		s.wrote()
		err = c.unlockWrite()
		if err != nil {
			return done, err
		}
		p, done = p[n:], done+n
	}
	return done, nil
}

// writable returns why the write side cannot send, if it cannot. c.mu is
// held.
func (s *Stream) writable() error {
	switch {
	case !s.headed:
		return errNoHead
	case s.err != nil:
		return s.err
	case s.localDone:
		return errWriteClosed
	case s.closed:
		return errStreamClosing
	case s.wabort:
		return errWriteAborted
	}
	return nil
}

// AbortWrite ends the write side from any goroutine: a Write or CloseWrite
// waiting for the backend's flow-control window fails now, as do those
// after. It is for a request whose response is over while its body is
// still being sent: the backend may never open the window again, and
// Close resets the stream.
func (s *Stream) AbortWrite() {
	s.c.mu.Lock()
	s.wabort = true
	s.wakeWrite()
	s.c.mu.Unlock()
}

// lockFor takes the write side for s's frames, for which n bytes of
// window were taken. If s failed meanwhile it gives the window back and
// fails.
func (s *Stream) lockFor(n int) error {
	c := s.c
	c.lockWrite()
	c.mu.Lock()
	err := s.writable()
	if err != nil {
		c.giveSendBack(s, int64(n))
	} else {
		c.dataOut += int64(n)
	}
	c.mu.Unlock()
	if err != nil {
		c.unlockWrite()
	}
	return err
}

// CloseWrite ends the request body: with trailers as a HEADERS frame, or
// with an empty DATA frame when there are none.
func (s *Stream) CloseWrite(trailers []hpack.HeaderField) error {
	c := s.c
	c.lockWrite()
	c.mu.Lock()
	err := s.writable()
	if err == nil {
		s.localDone = true
	}
	c.mu.Unlock()
	if err != nil {
		c.unlockWrite()
		return err
	}
	if len(trailers) > 0 {
		c.writeBlock(s.id, trailers, true, true)
	} else {
		c.wfr.WriteData(s.id, true, nil)
		c.sent.Add(1)
	}
	s.wrote()
	err = c.unlockWrite()
	return err
}

// Hold keeps the frames the stream's writer sends next in the
// connection's buffer until Release, so that a request's head, a body
// already in memory and its end go out in one write to the socket rather
// than one each. A wait for flow-control credit releases them first,
// since the backend's credit cannot come before they do. Hold and Release
// are called by the stream's writer, and Release before anything that
// waits for the backend or the client.
func (s *Stream) Hold() {
	if !s.held {
		s.held = true
		s.c.writers.Add(1)
	}
}

// Release ends a Hold: what was held goes to the socket, unless another
// writer is about to write, which then flushes it.
func (s *Stream) Release() error {
	if !s.held {
		return nil
	}
	s.held = false
	c := s.c
	c.writers.Add(-1)
	c.lockWrite()
	return c.unlockWrite()
}

// SetWriteDeadline bounds the waits of Write and CloseWrite; one past it
// fails with an error wrapping os.ErrDeadlineExceeded.
func (s *Stream) SetWriteDeadline(t time.Time) { s.setLimit(true, t, 0) }

// SetWriteTimeout bounds the waits of Write and CloseWrite to d after the
// first of them begins.
func (s *Stream) SetWriteTimeout(d time.Duration) { s.setLimit(true, time.Time{}, d) }

// SetReadDeadline bounds the waits of ReadHead and Read as
// SetWriteDeadline does the writer's.
func (s *Stream) SetReadDeadline(t time.Time) { s.setLimit(false, t, 0) }

// SetReadLimit bounds the waits of ReadHead and Read to limit, and to
// watch after the first of them begins, whichever comes first; a zero
// limit or watch is no bound.
func (s *Stream) SetReadLimit(limit time.Time, watch time.Duration) { s.setLimit(false, limit, watch) }

func (s *Stream) setLimit(write bool, limit time.Time, watch time.Duration) {
	s.c.mu.Lock()
	if write {
		s.wdl, s.wwatch = limit, watch
		if s.wwaiting {
			s.wakeWrite() // to wait for the new deadline
		}
	} else {
		s.rdl, s.rwatch = limit, watch
		if s.rwaiting {
			s.wakeRead()
		}
	}
	s.c.mu.Unlock()
}

// ReadHead waits for the next response head; informational (1xx) heads
// come first when the backend sends them. A head's Fields are valid until
// the next ReadHead, and the final head's until Close or Recycle.
func (s *Stream) ReadHead() (Head, error) {
	c := s.c
	c.mu.Lock()
	if s.used > 0 {
		s.dropUsed()
	}
	for {
		if s.hoff < len(s.heads) {
			h := s.heads[s.hoff]
			s.heads[s.hoff] = Head{}
			s.hoff++
			if h.Status < 200 {
				s.used += len(h.Fields)
			}
			if s.hoff == len(s.heads) {
				s.heads, s.hoff = s.heads[:0], 0
			}
			c.mu.Unlock()
			return h, nil
		}
		var err error
		switch {
		case !s.headed:
			err = errNoHead
		case s.err != nil:
			err = s.err
		case s.final:
			err = errors.New("h2up: the final response head was already read")
		case s.due(false):
			err = errReadTimeout
		}
		if err != nil {
			c.mu.Unlock()
			return Head{}, err
		}
		s.awaitRead()
	}
}

// dropUsed lets go of the fields of the informational heads ReadHead
// returned, with which the caller is done: a backend sending them without
// end would otherwise have the stream hold every one. They are the first
// of s.fields; the heads not yet read, and the trailers, follow in the
// order they came, and move down. c.mu is held.
func (s *Stream) dropUsed() {
	n := copy(s.fields, s.fields[s.used:])
	clear(s.fields[n:])
	s.fields, s.used = s.fields[:n], 0
	off := 0
	move := func(fs []hpack.HeaderField) []hpack.HeaderField {
		k := len(fs)
		off += k
		return s.fields[off-k : off : off]
	}
	for i := s.hoff; i < len(s.heads); i++ {
		s.heads[i].Fields = move(s.heads[i].Fields)
	}
	if s.trailers != nil {
		s.trailers = move(s.trailers)
	}
}

// Read reads response body bytes, io.EOF after the end of the stream.
// Bytes read are given back to the backend as window.
func (s *Stream) Read(p []byte) (int, error) {
	c := s.c
	c.mu.Lock()
	for {
		if s.off < len(s.buf) {
			n, credit := s.takeBody(p)
			c.mu.Unlock()
			if credit > 0 {
				c.writeCredit(s.id, credit)
			}
			return n, nil
		}
		var err error
		switch {
		case s.remoteDone:
			err = io.EOF
		case !s.headed:
			err = errNoHead
		case s.err != nil:
			err = s.err
		case s.due(false):
			err = errReadTimeout
		}
		if err != nil {
			c.mu.Unlock()
			return 0, err
		}
		s.awaitRead()
	}
}

// takeBody copies buffered body bytes into p and returns how many, and the
// window to give back for them, if it is time to. c.mu is held.
func (s *Stream) takeBody(p []byte) (n int, credit int64) {
	n = copy(p, s.buf[s.off:])
	s.off += n
	if s.off == len(s.buf) {
		s.buf, s.off = s.buf[:0], 0
	}
	if !s.remoteDone && !s.reset {
		s.unacked += int64(n)
		if s.unacked >= s.c.streamUpdateAt {
			credit, s.unacked = s.unacked, 0
			s.recvWin += credit
		}
	}
	return n, credit
}

// ReadNow reads the body bytes that have come, without waiting; end says
// that the body ended with them, its trailers, if any, come too.
func (s *Stream) ReadNow(p []byte) (n int, end bool) {
	c := s.c
	c.mu.Lock()
	var credit int64
	if s.off < len(s.buf) {
		n, credit = s.takeBody(p)
	}
	end = s.remoteDone && s.off == len(s.buf)
	c.mu.Unlock()
	if credit > 0 {
		c.writeCredit(s.id, credit)
	}
	return n, end
}

// Buffered returns how many body bytes Read can return without waiting.
func (s *Stream) Buffered() int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return len(s.buf) - s.off
}

// Trailers returns the trailer fields, once Read has returned io.EOF; nil
// when the response had none.
func (s *Stream) Trailers() []hpack.HeaderField {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return s.trailers
}

// LastActive returns when the stream last moved: a frame of it read, or
// body bytes written.
func (s *Stream) LastActive() time.Time { return epoch.Add(time.Duration(s.last.Load())) }

// Close ends the stream: one that has not ended both ways is reset
// (RST_STREAM CANCEL). Its place on the connection is free again. Close
// or Recycle is called once per Open, after which the stream is not used.
func (s *Stream) Close() { s.close(false) }

// Recycle is Close for a caller whose every use of the stream, on every
// goroutine, has returned: the stream is kept for the connection's next
// Open, with its channels and timers. Nothing may touch it after.
func (s *Stream) Recycle() { s.close(true) }

func (s *Stream) close(recycle bool) {
	c := s.c
	if s.held {
		s.held = false
		c.writers.Add(-1)
	}
	c.mu.Lock()
	if s.closed {
		c.mu.Unlock()
		return
	}
	s.closed = true
	rst := s.headed && !(s.localDone && s.remoteDone) && !s.reset && !c.closing
	if s.headed {
		delete(c.streams, s.id)
	}
	// The body buffer goes back to the connection, or stays with a
	// stream kept for reuse (keep), taken from the stream under mu, so
	// that a Read still running finds it gone.
	buf := s.buf
	s.buf, s.off = nil, 0
	if s.waiting {
		c.unwait(s)
	}
	s.wake() // a side still waiting fails now rather than at its deadline
	c.open--
	last := c.open == 0
	if last {
		c.idleSince = time.Now()
	}
	closeConn := last && (c.draining || c.goneAway) && !c.closing
	id := s.id
	if recycle && !s.rwaiting && !s.wwaiting && c.keep(s, buf) {
		buf = nil
	}
	c.putBuffer(buf)
	c.mu.Unlock()
	if rst {
		c.writeReset(id, http2.ErrCodeCancel)
	}
	if closeConn {
		c.Close()
	}
}
