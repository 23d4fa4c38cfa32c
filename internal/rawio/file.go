package rawio

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// File writes to a file (a log file, standard output) with raw write(2)
// calls while the writes are fast.
//
// Why: relay's request path makes no system call that Go's scheduler sees
// (see the package comment), so whenever a process goes idle between
// requests the runtime's monitor thread (sysmon) goes to sleep. Every
// ordinary os.File write wakes it (entersyscall), and once awake it polls
// every 20 µs for a millisecond before backing off; a write it catches in
// progress hands the processor to another thread. With the access log
// flushing a few dozen times a second, each serving process of
// processes: 2 saw about a fifth more context switches per request and
// served about a tenth fewer requests than with the log off; raw writes
// take most of that back (bench/history.md, "Where the rest went, and raw
// writes").
//
// The cost of a raw write is that the thread keeps its processor while
// the write lasts. A write into the page cache takes microseconds; a disk
// that stalls could hold the processor as long as it stalls, as it holds
// an nginx worker. So a write that took longer than SlowWrite makes the
// following writes ordinary ones, which the runtime can work around, for
// SlowFor.
type File struct {
	f  *os.File
	rc syscall.RawConn // nil: the file offers none, write through f
	// slowUntil is when writes may be raw again, in Unix nanoseconds.
	slowUntil atomic.Int64
}

const (
	// SlowWrite is how long a raw write may take before File stops
	// making them for a while.
	SlowWrite = time.Millisecond
	// SlowFor is how long File writes through the scheduler after a slow
	// write.
	SlowFor = 30 * time.Second
)

// NewFile writes to f, which the caller keeps owning (and closes).
func NewFile(f *os.File) *File {
	w := &File{f: f}
	if rc, err := f.SyscallConn(); err == nil {
		w.rc = rc
	}
	return w
}

// Write writes all of p. A descriptor that is not ready (a full pipe)
// waits in Go's poller.
func (w *File) Write(p []byte) (int, error) {
	start := time.Now()
	if w.rc == nil || start.UnixNano() < w.slowUntil.Load() {
		return w.f.Write(p)
	}
	n := 0
	var errno syscall.Errno
	err := w.rc.Write(func(fd uintptr) bool {
		for n < len(p) {
			k, e := Write(fd, p[n:])
			switch {
			case e == syscall.EAGAIN:
				return false
			case e != 0:
				errno = e
				return true
			case k == 0:
				errno = syscall.EIO // write(2) never returns 0 for a non-empty buffer
				return true
			}
			n += k
		}
		return true
	})
	if took := time.Since(start); took > SlowWrite {
		w.slowUntil.Store(start.Add(took + SlowFor).UnixNano())
	}
	if err != nil {
		// The poller refused (the file was closed): os.File says so in
		// its own words.
		m, err := w.f.Write(p[n:])
		return n + m, err
	}
	if errno != 0 {
		return n, &os.PathError{Op: "write", Path: w.f.Name(), Err: errno}
	}
	return n, nil
}

// slow reports whether writes currently go through the scheduler.
func (w *File) slow() bool { return time.Now().UnixNano() < w.slowUntil.Load() }
