package logging

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Limited writes lines to a logger at a bounded rate: at most n in each
// period, the rest counted and dropped. The first line written after some
// were dropped says how many ("suppressed"), so the log still tells how
// often it happened. It is for lines a client can cause, such as abuse
// warnings: many attacking connections must not flood the log.
type Limited struct {
	log *slog.Logger
	n   int
	per time.Duration
	now func() time.Time // time.Now; a test's clock

	mu         sync.Mutex
	start      time.Time // the current period's start
	written    int       // lines written in the current period
	suppressed int       // lines dropped since the last one written
}

// NewLimited returns a Limited writing to log at most n lines every per.
// n below 1 is taken as 1.
func NewLimited(log *slog.Logger, n int, per time.Duration) *Limited {
	return &Limited{log: log, n: max(n, 1), per: per, now: time.Now}
}

// Warn writes a line at warning level, unless n lines went out this period.
func (l *Limited) Warn(msg string, args ...any) { l.Log(slog.LevelWarn, msg, args...) }

// Log writes a line at level, unless n lines went out this period. A line
// that is dropped costs no formatting.
func (l *Limited) Log(level slog.Level, msg string, args ...any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	l.mu.Lock()
	now := l.now()
	if now.Sub(l.start) >= l.per {
		l.start, l.written = now, 0
	}
	if l.written >= l.n {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.written++
	dropped := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if dropped > 0 {
		args = append(args, "suppressed", dropped)
	}
	l.log.Log(context.Background(), level, msg, args...)
}
