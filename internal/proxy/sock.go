package proxy

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

// sock is a connection whose reads and writes relay issues itself, as raw
// system calls inside Go's poller (syscall.RawConn), instead of through
// net.Conn's Read and Write.
//
// The difference is what the Go scheduler sees. net.Conn enters every read
// and write as a system call that might block, so the runtime's monitor
// may hand the processor to another OS thread when one lasts a few tens of
// microseconds, as a loopback write does when the kernel delivers the
// bytes and wakes the receiver. With few threads (workers: 1) that handoff
// moves relay between threads many times a second: thread wake-ups,
// futex calls and cold caches. Reads and writes on a non-blocking socket
// never block, so relay issues them as raw system calls: the thread keeps
// its processor and goes on with the next connection. A socket that is not
// ready still parks the goroutine in the poller, deadlines included.
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
	n, errno := rawRead(fd, s.rd.buf)
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
		k, errno := rawWrite(fd, w.buf[w.n:])
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

// rawRead is read(2) on a non-blocking descriptor, retried on EINTR.
func rawRead(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if errno == 0 {
			return int(n), 0
		}
		if errno != syscall.EINTR {
			return 0, errno
		}
	}
}

// rawWrite is write(2) on a non-blocking descriptor, retried on EINTR.
// Writing to a connection the peer has reset fails with EPIPE; the
// SIGPIPE that comes with it is ignored by the Go runtime for sockets.
func rawWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if errno == 0 {
			return int(n), 0
		}
		if errno != syscall.EINTR {
			return 0, errno
		}
	}
}
