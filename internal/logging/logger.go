// Package logging is where relay's logs go: the process log (JSON lines
// through log/slog) and the access log (one JSON line per proxied request,
// written by a buffered writer that never blocks the request path).
//
// Both may share one Output, which is stdout or a size-rotated file. The
// access log writes whole lines only, so its lines never interleave with the
// process log's inside a line.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// NewLogger returns the process logger: JSON lines to w, dropping records
// below level. It is the format the access log imitates, so tools that read
// one read both.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// ParseLevel turns a configured log level into a slog.Level. It accepts
// debug, info, warn (or warning) and error in any case, and slog's offset
// form such as "info+2".
func ParseLevel(s string) (slog.Level, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	if name == "warning" {
		name = "warn"
	}
	var l slog.Level
	if name == "" {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error", s)
	}
	if err := l.UnmarshalText([]byte(name)); err != nil {
		return 0, fmt.Errorf("log level %q: want debug, info, warn or error: %w", s, err)
	}
	return l, nil
}
