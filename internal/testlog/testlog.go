// Package testlog is a log destination a test reads while the code under
// test writes to it. It is imported by tests only.
package testlog

import (
	"log/slog"
	"strings"
	"sync"
)

// Buffer collects what is written to it; it is safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count is how many times sub occurs in what was written.
func (l *Buffer) Count(sub string) int { return strings.Count(l.String(), sub) }

// New is a JSON logger writing to a new Buffer.
func New() (*slog.Logger, *Buffer) {
	b := &Buffer{}
	return slog.New(slog.NewJSONHandler(b, nil)), b
}
