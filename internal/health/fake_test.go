package health

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	"relay/internal/backend"
)

// fakeClock hands every ticker to the test, which ticks it by sending on its
// channel. The send completes only when the loop is waiting for the next
// round, so each send also proves the previous round was recorded.
type fakeClock struct {
	fire    bool               // After fires at once when set, never otherwise
	afters  chan time.Duration // the offset of each After call
	tickers chan *fakeTicker   // each ticker as it is created
}

func newFakeClock(loops int, fire bool) *fakeClock {
	return &fakeClock{
		fire:    fire,
		afters:  make(chan time.Duration, loops),
		tickers: make(chan *fakeTicker, loops),
	}
}

func (f *fakeClock) After(d time.Duration) <-chan time.Time {
	f.afters <- d
	if !f.fire {
		return nil // a nil channel never delivers; the loop leaves through ctx
	}
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

func (f *fakeClock) NewTicker(d time.Duration) Ticker {
	t := &fakeTicker{every: d, ch: make(chan time.Time), stopped: make(chan struct{})}
	f.tickers <- t
	return t
}

type fakeTicker struct {
	every   time.Duration
	ch      chan time.Time
	stopped chan struct{}
}

func (t *fakeTicker) C() <-chan time.Time { return t.ch }
func (t *fakeTicker) Stop()               { close(t.stopped) }

// tick starts the next probe round, failing the test if the loop never asks.
func (t *fakeTicker) tick(tb testing.TB) {
	tb.Helper()
	select {
	case t.ch <- time.Time{}:
	case <-time.After(5 * time.Second):
		tb.Fatal("probe loop did not wait for its next tick")
	}
}

var errProbe = errors.New("connection refused")

// script is a probe for one backend that returns the results of a string,
// P for pass and F for fail, then blocks until the checker cancels it. Every
// call is announced on calls, numbered from 0.
type script struct {
	results string
	n       int // only the single caller of this backend touches it
	calls   chan int
}

func newScript(results string) *script {
	return &script{results: results, calls: make(chan int, len(results)+1)}
}

func (s *script) probe(ctx context.Context, _ *backend.Backend) error {
	i := s.n
	s.n++
	s.calls <- i
	if i < len(s.results) {
		if s.results[i] == 'P' {
			return nil
		}
		return errProbe
	}
	<-ctx.Done()
	return ctx.Err()
}

// waitCall waits until the probe was called for the i-th time.
func (s *script) waitCall(tb testing.TB, i int) {
	tb.Helper()
	select {
	case got := <-s.calls:
		if got != i {
			tb.Fatalf("probe call %d, want %d", got, i)
		}
	case <-time.After(5 * time.Second):
		tb.Fatalf("probe call %d never came", i)
	}
}

// transitions records onChange calls.
type transitions struct {
	mu  sync.Mutex
	got []bool
}

func (tr *transitions) onChange(_ *backend.Backend, healthy bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.got = append(tr.got, healthy)
}

func (tr *transitions) list() []bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]bool(nil), tr.got...)
}

// logRecords keeps every log record for inspection.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecords) WithGroup(string) slog.Handler            { return l }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

func (l *logRecords) all() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]slog.Record(nil), l.records...)
}

func attrs(r slog.Record) map[string]string {
	m := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	return m
}

func newBackend(tb testing.TB, raw string) *backend.Backend {
	tb.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := backend.New(u, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func zeroRand(int64) int64 { return 0 }
