package proxy

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	"relay/internal/rawio"
)

// sock is a connection whose reads and writes relay issues itself, as raw
// system calls inside Go's poller (package rawio), instead of through
// net.Conn's Read and Write, so the thread serving it keeps its processor.
// With few threads (workers: 1) net.Conn's calls moved relay between
// threads many times a second: thread wake-ups, futex calls and cold
// caches. A socket that is not ready still parks the goroutine in the
// poller, deadlines included.
//
// A connection that is not a socket (tests, a custom Dial) uses its own
// Read and Write.
type sock struct {
	net.Conn
	raw syscall.RawConn // nil: use Conn's methods

	// State of the read and of the write in progress (a tunnel reads and
	// writes from two goroutines), used by the callbacks below. The
	// callbacks are bound once so a call allocates nothing.
	rd, wr  ioState
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool
}

func newSock(c net.Conn) *sock {
	s := &sock{Conn: c}
	if sc, ok := c.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			s.raw = raw
			s.readFn = s.readStep
			s.writeFn = s.writeStep
		}
	}
	return s
}

var errNotSocket = errors.New("not a socket")

// SyscallConn gives the socket to h1.Reader, which reads an idle
// connection itself so it can hand its buffer back before waiting.
func (s *sock) SyscallConn() (syscall.RawConn, error) {
	if s.raw == nil {
		return nil, errNotSocket
	}
	return s.raw, nil
}

// Read reads into p, waiting in the poller while nothing has arrived.
func (s *sock) Read(p []byte) (int, error) {
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
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, os.NewSyscallError("read", errno)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (s *sock) readStep(fd uintptr) bool {
	n, errno := rawio.Read(fd, s.rd.buf)
	if errno == syscall.EAGAIN {
		return false
	}
	s.rd.n, s.rd.errno = n, errno
	return true
}

// Write writes all of p, waiting in the poller while the socket's send
// buffer is full.
func (s *sock) Write(p []byte) (int, error) {
	if s.raw == nil {
		return s.Conn.Write(p)
	}
	s.wr = ioState{buf: p}
	err := s.raw.Write(s.writeFn)
	n, errno := s.wr.n, s.wr.errno
	s.wr.buf = nil
	if err != nil {
		return n, err
	}
	if errno != 0 {
		return n, os.NewSyscallError("write", errno)
	}
	return n, nil
}

func (s *sock) writeStep(fd uintptr) bool {
	w := &s.wr
	for w.n < len(w.buf) {
		k, errno := rawio.Write(fd, w.buf[w.n:])
		if errno == syscall.EAGAIN {
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
}
