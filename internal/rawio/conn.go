package rawio

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Conn is a connection whose reads and writes relay issues itself, as raw
// system calls inside Go's poller, instead of through net.Conn's Read and
// Write, so the thread serving it keeps its processor. With few threads
// (workers: 1) net.Conn's calls moved relay between threads many times a
// second: thread wake-ups, futex calls and cold caches. A socket that is
// not ready still parks the goroutine in the poller, deadlines included.
//
// The fallback: a connection that is not itself a socket (crypto/tls over
// TCP, an in-memory connection in tests, a custom dialer's) is read and
// written through its own Read and Write; Raw reports which. Liveness
// checks on such connections go through Quiet, which finds the socket
// under a TLS connection and otherwise answers "not known to be quiet".
type Conn struct {
	net.Conn
	raw syscall.RawConn // nil: use Conn's methods

	// WriteWait, when set, bounds each wait for the peer to take bytes:
	// a Write whose socket buffer stays full that long fails with
	// os.ErrDeadlineExceeded (nginx's send_timeout). It costs nothing
	// while the buffer has room: the deadline is set only when a write
	// would block, moved on whenever bytes go out, and put back after to
	// the write deadline the caller set, which it never extends.
	WriteWait time.Duration
	// callerWrite is the write deadline set through SetDeadline or
	// SetWriteDeadline, in Unix nanoseconds; 0: none.
	callerWrite atomic.Int64

	// State of the read and of the write in progress (a tunnel reads and
	// writes from two goroutines), used by the callbacks below. The
	// callbacks are bound once so a call allocates nothing.
	rd, wr  ioState
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool

	// State of WriteThenRead and ReadLent, bound the same way.
	wtr     wtrState
	wtrFn   func(fd uintptr) bool
	lent    Lender
	lentN   int
	lentErr syscall.Errno
	lentFn  func(fd uintptr) bool

	// State of Readable, bound the same way.
	peekBuf [1]byte
	peekN   int
	peekErr error
	peekFn  func(fd uintptr) bool
}

// NewConn wraps c. When c is a socket its reads and writes become raw
// system calls; otherwise they stay c's own.
func NewConn(c net.Conn) *Conn {
	s := &Conn{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
			s.readFn = s.readStep
			s.writeFn = s.writeStep
			s.wtrFn = s.writeThenReadStep
			s.lentFn = s.lentStep
			s.peekFn = s.peekStep
		}
	}
	return s
}

// SetDeadline sets the connection's read and write deadlines; WriteWait
// never extends the write deadline.
func (s *Conn) SetDeadline(t time.Time) error {
	s.callerWrite.Store(unixNano(t))
	return s.Conn.SetDeadline(t)
}

// SetWriteDeadline sets the connection's write deadline; WriteWait never
// extends it.
func (s *Conn) SetWriteDeadline(t time.Time) error {
	s.callerWrite.Store(unixNano(t))
	return s.Conn.SetWriteDeadline(t)
}

func (s *Conn) callerDeadline() time.Time {
	if ns := s.callerWrite.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// NetConn returns the wrapped connection.
func (s *Conn) NetConn() net.Conn { return s.Conn }

// Raw reports whether reads and writes are raw system calls on a socket.
func (s *Conn) Raw() bool { return s.raw != nil }

// Read reads into p, waiting in the poller while nothing has arrived.
func (s *Conn) Read(p []byte) (int, error) {
	if s.raw == nil {
		return s.Conn.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	s.rd = ioState{buf: p}
	err := s.raw.Read(s.readFn)
	n, errno := s.rd.n, s.rd.errno
	s.rd.buf = nil
	return result(n, errno, err, "read")
}

func (s *Conn) readStep(fd uintptr) bool {
	n, errno := Read(fd, s.rd.buf)
	if errno == syscall.EAGAIN {
		return false
	}
	s.rd.n, s.rd.errno = n, errno
	return true
}

// Write writes all of p, waiting in the poller while the socket's send
// buffer is full.
func (s *Conn) Write(p []byte) (int, error) {
	if s.raw == nil {
		return s.Conn.Write(p)
	}
	s.wr = ioState{buf: p}
	err := s.raw.Write(s.writeFn)
	n, errno := s.wr.n, s.wr.errno
	s.wr.buf = nil
	if s.wr.armed {
		s.Conn.SetWriteDeadline(s.callerDeadline())
		s.wr.armed = false
	}
	if err != nil {
		return n, err
	}
	if errno != 0 {
		return n, os.NewSyscallError("write", errno)
	}
	return n, nil
}

func (s *Conn) writeStep(fd uintptr) bool {
	w := &s.wr
	for w.n < len(w.buf) {
		k, errno := Write(fd, w.buf[w.n:])
		if errno == syscall.EAGAIN {
			if s.WriteWait > 0 && (!w.armed || w.n > w.armedAt) {
				// The poller waits from here: bound the wait,
				// afresh if bytes went out since the last one,
				// unless the caller's deadline comes first.
				d := time.Now().Add(s.WriteWait)
				if c := s.callerDeadline(); c.IsZero() || d.Before(c) {
					s.Conn.SetWriteDeadline(d)
					w.armed, w.armedAt = true, w.n
				}
			}
			return false
		}
		if errno != 0 {
			w.errno = errno
			return true
		}
		w.n += k
	}
	return true
}

// ioState is one read or write in progress.
type ioState struct {
	buf   []byte
	n     int
	errno syscall.Errno
	// armed says a write set a deadline (WriteWait), when n was armedAt.
	armed   bool
	armedAt int
}

// result turns a raw read's outcome into Read's: an error from the poller
// (a deadline, a closed connection), a failed system call, or 0 bytes at
// the end of the stream.
func result(n int, errno syscall.Errno, err error, op string) (int, error) {
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, os.NewSyscallError(op, errno)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// WriteThenRead writes req and then reads the answer into buf, waiting for
// the socket to become readable before the first read instead of trying a
// read that would almost always fail with EAGAIN: that saves a system call
// per request. The write happens inside the raw read callback, after Go's
// poller has reset the descriptor's readiness, so an answer arriving right
// after the write cannot be missed. When the send buffer fills, the rest of
// req goes out through Write first. Without a raw socket it is Write then
// Read.
func (s *Conn) WriteThenRead(req, buf []byte) (int, error) {
	if s.raw == nil {
		if _, err := s.Conn.Write(req); err != nil {
			return 0, err
		}
		return s.Conn.Read(buf)
	}
	w := &s.wtr
	*w = wtrState{req: req, buf: buf}
	err := s.raw.Read(s.wtrFn)
	n, rest, errno, op, written := w.n, w.req, w.errno, w.op, w.written
	*w = wtrState{}
	if !written {
		// The poller refused before the callback ran (a read deadline
		// that had passed already): the request must still go out.
		if _, err := s.Write(req); err != nil {
			return 0, err
		}
		return s.Read(buf)
	}
	if err == nil && errno == 0 && len(rest) > 0 {
		// The socket buffer was full: finish through the poller.
		if _, err := s.Write(rest); err != nil {
			return 0, err
		}
		return s.Read(buf)
	}
	return result(n, errno, err, op)
}

// wtrState is the state of one WriteThenRead.
type wtrState struct {
	req, buf []byte
	written  bool
	n        int
	errno    syscall.Errno
	op       string
}

// writeThenReadStep is WriteThenRead's callback: the first call writes
// the request and asks to wait for readability; later calls read.
func (s *Conn) writeThenReadStep(fd uintptr) bool {
	w := &s.wtr
	if !w.written {
		w.written = true
		for len(w.req) > 0 {
			k, errno := Write(fd, w.req)
			if errno != 0 {
				if errno != syscall.EAGAIN {
					w.errno, w.op = errno, "write"
				}
				return true // on EAGAIN WriteThenRead writes the rest
			}
			w.req = w.req[k:]
		}
		return false // wait for readability
	}
	n, errno := Read(fd, w.buf)
	if errno == syscall.EAGAIN {
		return false
	}
	w.n, w.errno, w.op = n, errno, "read"
	return true
}

// Lender is a read buffer that is lent to a connection only while bytes
// are there to read: a connection that waits idle gives it back, so ten
// thousand idle connections hold no buffers. h1's pooled Reader is one.
type Lender interface {
	// Borrow returns the buffer to read into, taking one if needed.
	Borrow() []byte
	// GiveBack returns the buffer: nothing has arrived and the connection
	// is about to wait.
	GiveBack()
}

// ReadLent reads into l's buffer. It tries a read and, when nothing has
// arrived, gives the buffer back before waiting, borrowing one again once
// the socket is readable. The system calls are those of a plain read: a
// failed read, a wait, a read. Without a raw socket it reads l's buffer
// through the connection's own Read and never gives it back.
func (s *Conn) ReadLent(l Lender) (int, error) {
	if s.raw == nil {
		return s.Conn.Read(l.Borrow())
	}
	s.lent, s.lentN, s.lentErr = l, 0, 0
	err := s.raw.Read(s.lentFn)
	n, errno := s.lentN, s.lentErr
	s.lent = nil
	return result(n, errno, err, "read")
}

func (s *Conn) lentStep(fd uintptr) bool {
	n, errno := Read(fd, s.lent.Borrow())
	if errno == syscall.EAGAIN {
		s.lent.GiveBack()
		return false
	}
	s.lentN, s.lentErr = n, errno
	return true
}

// Readable reports whether a read would return at once: bytes, the end
// of the stream or an error wait on the socket. It is a non-blocking
// one-byte MSG_PEEK, which consumes nothing and never waits, made
// through the socket held since NewConn, so it allocates nothing. A
// connection that is not a raw socket (TLS, an in-memory one) cannot be
// looked at: false, "not known to be readable", so the caller does what
// it would do before a wait. Like Read, it is for the reading goroutine.
func (s *Conn) Readable() bool {
	if s.raw == nil {
		return false
	}
	s.peekN, s.peekErr = 0, nil
	if s.raw.Read(s.peekFn) != nil {
		return false
	}
	return s.peekErr != syscall.EAGAIN && s.peekErr != syscall.EINTR
}

func (s *Conn) peekStep(fd uintptr) bool {
	s.peekN, _, s.peekErr = syscall.Recvfrom(int(fd), s.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return true // never wait
}
