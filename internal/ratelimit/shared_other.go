//go:build !linux

package ratelimit

import (
	"errors"
	"os"
)

var errBadTable = errors.New("not a rate limit table")

var errNoShared = errors.New("rate limit table: shared tables need Linux")

// CreateShared needs Linux, as several serving processes do.
func CreateShared(keys int) (*os.File, error) { return nil, errNoShared }

// OpenShared needs Linux, as several serving processes do.
func OpenShared(f *os.File) (*Table, error) { return nil, errNoShared }

// monotonic is 0: without shared tables, one process's clock is enough.
func monotonic() int64 { return 0 }

// exited is false: without /proc, a process that exists is alive.
func exited(pid uint64) bool { return false }
