package ratelimit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

var errBadTable = errors.New("not a rate limit table")

// CreateShared makes a table of about keys buckets in a memory file that
// serving processes inherit and map with OpenShared, so that they share
// the buckets. Its pages are taken as keys first use them.
func CreateShared(keys int) (*os.File, error) {
	fd, err := unix.MemfdCreate("relay-rate-limits", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("rate limit table: %w", err)
	}
	f := os.NewFile(uintptr(fd), "rate limit table")
	size := tableWords(keys) * 8
	mem, err := mapFile(f, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	initHeader(wordsOf(mem))
	unix.Munmap(mem)
	return f, nil
}

// OpenShared maps the table in f, made by CreateShared in this or
// another process.
func OpenShared(f *os.File) (*Table, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("rate limit table: %w", err)
	}
	mem, err := mapFile(f, int(st.Size()))
	if err != nil {
		return nil, err
	}
	t, err := tableOver(wordsOf(mem), mem)
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("rate limit table: %s holds %w", f.Name(), err)
	}
	return t, nil
}

// mapFile sizes f to size bytes when it is shorter and maps it, shared.
func mapFile(f *os.File, size int) ([]byte, error) {
	if size < (headerWords+setWords)*8 {
		return nil, fmt.Errorf("rate limit table: %s is %d bytes, too short", f.Name(), size)
	}
	if st, err := f.Stat(); err == nil && st.Size() < int64(size) {
		if err := f.Truncate(int64(size)); err != nil {
			return nil, fmt.Errorf("rate limit table: %w", err)
		}
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("rate limit table: mapping %s: %w", f.Name(), err)
	}
	return mem, nil
}

// wordsOf is mem as 64-bit words; a mapping is page-aligned.
func wordsOf(mem []byte) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(mem))), len(mem)/8)
}

// monotonic reads the clock Go's monotonic times are read from, in
// nanoseconds: the same instant reads the same in every process.
func monotonic() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// exited reports whether process pid has exited and waits to be reaped,
// as /proc says: its state is Z (zombie) or X (dead).
func exited(pid uint64) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false // it exists, as far as relay can tell
	}
	// "PID (COMM) STATE ...": COMM may hold anything, parentheses too.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	return stat[i+2] == 'Z' || stat[i+2] == 'X'
}
