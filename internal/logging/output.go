package logging

import (
	"fmt"
	"io"
	"os"

	"gopkg.in/natefinch/lumberjack.v2"
)

// Output is a log destination: stdout, or a file rotated by size. It is safe
// for concurrent use, so the process logger and the access log can share one.
type Output struct {
	w    io.Writer
	file *lumberjack.Logger // nil when writing to stdout
}

// Open returns the destination for file. An empty file means stdout, which
// Close leaves open. Otherwise the file is rotated once it would grow past
// maxSizeMB megabytes, keeping at most maxBackups old files for at most
// maxAgeDays days (0 means no limit for either; a zero maxSizeMB means
// lumberjack's default of 100). Rotated files keep their original name with
// a UTC timestamp added (lb-2006-01-02T15-04-05.000.log) and are not
// compressed.
//
// The file is opened once here, so a path that cannot be written fails at
// start rather than at the first log line.
func Open(file string, maxSizeMB, maxBackups, maxAgeDays int) (*Output, error) {
	if file == "" {
		return &Output{w: os.Stdout}, nil
	}
	if maxSizeMB < 0 || maxBackups < 0 || maxAgeDays < 0 {
		return nil, fmt.Errorf("log file %q: size, backups and age must not be negative (got %d MB, %d backups, %d days)",
			file, maxSizeMB, maxBackups, maxAgeDays)
	}
	// lumberjack opens lazily and, if it cannot append to an existing file,
	// quietly starts a new one; probing here turns a typo in the path or a
	// read-only directory into an error at start that names the path.
	f, err := openAppend(file)
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("log file %q: %w", file, err)
	}
	lj := &lumberjack.Logger{
		Filename:   file,
		MaxSize:    maxSizeMB,
		MaxBackups: maxBackups,
		MaxAge:     maxAgeDays,
	}
	return &Output{w: lj, file: lj}, nil
}

// Write writes p to the destination. Each call reaches the file whole, so a
// caller that writes whole lines never sees them split across a rotation.
func (o *Output) Write(p []byte) (int, error) {
	return o.w.Write(p)
}

// Rotate closes the current log file and starts a new one under the
// configured name, moving any file still there aside as a backup. relay calls
// it on SIGUSR1: after an external rotator (logrotate) has renamed the file,
// relay stops writing to the renamed one. On stdout it does nothing.
func (o *Output) Rotate() error {
	if o.file == nil {
		return nil
	}
	if err := o.file.Rotate(); err != nil {
		return fmt.Errorf("log file %q: rotate: %w", o.file.Filename, err)
	}
	return nil
}

// Close closes the log file. Stdout is left open because relay does not own it.
func (o *Output) Close() error {
	if o.file == nil {
		return nil
	}
	if err := o.file.Close(); err != nil {
		return fmt.Errorf("log file %q: close: %w", o.file.Filename, err)
	}
	return nil
}
