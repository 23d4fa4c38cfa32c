package logging

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"relay/internal/rawio"
)

// Appender writes to a log file that several processes share, as nginx's
// workers do: each holds the file open with O_APPEND, so every write lands
// whole at the end of the file, whoever else writes. Callers write whole
// lines (the access log writes batches of them), so lines never
// interleave. Reopen follows a rotation: the file at the path is a new one.
//
// Writes are raw system calls while they are fast (rawio.File says why).
type Appender struct {
	path string
	mu   sync.RWMutex // writes share it; Reopen and Close take it alone
	f    *os.File     // nil once closed
	w    *rawio.File  // writes to f
}

// OpenAppend opens path for appending, creating it when missing.
func OpenAppend(path string) (*Appender, error) {
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	return &Appender{path: path, f: f, w: rawio.NewFile(f)}, nil
}

func openAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("log file %q: %w", path, err)
	}
	return f, nil
}

// Write appends p in one write. After Close it fails with os.ErrClosed.
func (a *Appender) Write(p []byte) (int, error) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.f == nil {
		return 0, a.errClosed()
	}
	return a.w.Write(p)
}

// Reopen switches to the file now at the path; writes in progress finish
// on the old one. After Close it opens nothing and fails with
// os.ErrClosed: a rotation announced as the writer stops must not leave a
// file open.
func (a *Appender) Reopen() error {
	if a.closed() {
		return a.errClosed()
	}
	f, err := openAppend(a.path)
	if err != nil {
		return err
	}
	a.mu.Lock()
	old := a.f
	if old == nil { // closed meanwhile
		a.mu.Unlock()
		f.Close()
		return a.errClosed()
	}
	a.f, a.w = f, rawio.NewFile(f)
	a.mu.Unlock()
	return old.Close()
}

// Close closes the file; writes and reopens after it fail with
// os.ErrClosed, and so does a second Close.
func (a *Appender) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return a.errClosed()
	}
	err := a.f.Close()
	a.f = nil
	return err
}

func (a *Appender) closed() bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.f == nil
}

func (a *Appender) errClosed() error { return fmt.Errorf("log file %q: %w", a.path, os.ErrClosed) }

// Shared is the supervisor's side of a log file its processes append to:
// it writes through an Appender like them, and rotates the file by size
// for all of them, since none sees the others' writes.
type Shared struct {
	*Appender
	rotating   sync.Mutex // one rotation at a time; guards rotated
	rotated    time.Time  // the time in the name of the last backup
	maxSize    int64
	maxBackups int
	maxAgeDays int
}

// OpenShared opens file for appending and rotation by size, with the
// rotation settings of Open: rotated files are named as Open names them
// and pruned alike.
func OpenShared(file string, maxSizeMB, maxBackups, maxAgeDays int) (*Shared, error) {
	if maxSizeMB < 0 || maxBackups < 0 || maxAgeDays < 0 {
		return nil, fmt.Errorf("log file %q: size, backups and age must not be negative (got %d MB, %d backups, %d days)",
			file, maxSizeMB, maxBackups, maxAgeDays)
	}
	a, err := OpenAppend(file)
	if err != nil {
		return nil, err
	}
	if maxSizeMB == 0 {
		maxSizeMB = 100
	}
	return &Shared{Appender: a, maxSize: int64(maxSizeMB) << 20, maxBackups: maxBackups, maxAgeDays: maxAgeDays}, nil
}

// Due reports whether the file has reached its rotation size.
func (s *Shared) Due() bool {
	fi, err := os.Stat(s.path)
	return err == nil && fi.Size() >= s.maxSize
}

// Rotate moves the file aside under a timestamped name (as Open's
// rotation does), reopens the path and prunes old files; the caller then
// tells the other writers to reopen it too. Rotations run one at a time,
// and the new file is opened to append, never truncated: a process that
// reopens the path late, following the rotation before, may have created
// it already, and its lines stay.
func (s *Shared) Rotate() error {
	s.rotating.Lock()
	defer s.rotating.Unlock()
	if s.closed() {
		return s.errClosed()
	}
	mode := os.FileMode(0)
	if fi, err := os.Stat(s.path); err == nil {
		mode = fi.Mode().Perm()
	}
	now := time.Now()
	at, err := moveAside(s.path, now, s.rotated)
	if err != nil {
		return fmt.Errorf("log file %q: rotate: %w", s.path, err)
	}
	s.rotated = at
	if err := s.Reopen(); err != nil {
		return err
	}
	if mode != 0 {
		os.Chmod(s.path, mode) // the new file is readable as the old one was
	}
	return prune(s.path, s.maxBackups, s.maxAgeDays, now)
}

// RotateCheckEvery is how often the supervisor looks at a shared log
// file's size.
const RotateCheckEvery = time.Second
