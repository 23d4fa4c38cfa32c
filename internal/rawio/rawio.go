// Package rawio reads and writes non-blocking sockets with raw system calls,
// for use inside syscall.RawConn callbacks.
//
// net.Conn enters every read and write as a system call that might block,
// so the Go runtime may hand the calling thread's processor to another OS
// thread when one lasts a few tens of microseconds, as a loopback write
// does when the kernel delivers the bytes and wakes the receiver. A read or
// write on a non-blocking socket never blocks, so relay issues them as raw
// system calls: the thread keeps its processor. Waiting for readiness stays
// with Go's poller (RawConn.Read and Write), deadlines included.
package rawio

import (
	"syscall"
	"unsafe"
)

// Read is read(2) on a non-blocking descriptor, retried on EINTR. It
// returns syscall.EAGAIN when nothing has arrived, and 0 bytes with no
// error at end of stream. An empty p reads nothing and returns 0, 0.
func Read(fd uintptr, p []byte) (int, syscall.Errno) {
	return call(syscall.SYS_READ, fd, p)
}

// Write is write(2) on a non-blocking descriptor, retried on EINTR. It may
// write less than p; syscall.EAGAIN means the send buffer is full. Writing
// to a connection the peer has reset fails with EPIPE; the SIGPIPE that
// comes with it is ignored by the Go runtime for sockets. An empty p
// writes nothing and returns 0, 0.
func Write(fd uintptr, p []byte) (int, syscall.Errno) {
	return call(syscall.SYS_WRITE, fd, p)
}

// call makes system call trap (read or write) on fd and p.
func call(trap, fd uintptr, p []byte) (int, syscall.Errno) {
	if len(p) == 0 {
		return 0, 0
	}
	for {
		n, _, errno := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if errno == 0 {
			return int(n), 0
		}
		if errno != syscall.EINTR {
			return 0, errno
		}
	}
}
