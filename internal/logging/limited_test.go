package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lines decodes the JSON lines in buf.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// At most n lines go out per period; the first line of a later period
// says how many were dropped, and the count starts again after it.
func TestLimitedBoundsTheLinesAndCountsTheRest(t *testing.T) {
	var buf bytes.Buffer
	l := NewLimited(NewLogger(&buf, slog.LevelInfo), 3, time.Second)
	clock := time.Unix(1000, 0)
	l.now = func() time.Time { return clock }

	for i := range 10 {
		l.Warn("abuse", "i", i)
	}
	if got := lines(t, &buf); len(got) != 3 {
		t.Fatalf("%d lines in the first period, want 3", len(got))
	}
	clock = clock.Add(time.Second)
	l.Warn("abuse", "i", 10)
	l.Warn("abuse", "i", 11)
	got := lines(t, &buf)
	if len(got) != 5 {
		t.Fatalf("%d lines after the second period began, want 5", len(got))
	}
	if s := got[3]["suppressed"]; s != float64(7) {
		t.Errorf("the first line of the second period: suppressed %v, want 7", s)
	}
	if s, ok := got[4]["suppressed"]; ok {
		t.Errorf("the next line says suppressed %v again", s)
	}
	for _, m := range got {
		if m["level"] != "WARN" || m["msg"] != "abuse" {
			t.Errorf("line %v: want level WARN and the message", m)
		}
	}
}

// Lines below the logger's level are neither written nor counted.
func TestLimitedSkipsDisabledLevels(t *testing.T) {
	var buf bytes.Buffer
	l := NewLimited(NewLogger(&buf, slog.LevelWarn), 1, time.Hour)
	for range 5 {
		l.Log(slog.LevelDebug, "quiet")
	}
	l.Warn("loud")
	got := lines(t, &buf)
	if len(got) != 1 || got[0]["msg"] != "loud" || got[0]["suppressed"] != nil {
		t.Errorf("lines %v; want one, with nothing suppressed", got)
	}
}

// Many goroutines logging at once get no more than n lines out.
func TestLimitedHoldsUnderConcurrency(t *testing.T) {
	var buf syncBuffer
	l := NewLimited(NewLogger(&buf, slog.LevelInfo), 5, time.Hour)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				l.Warn("abuse")
			}
		})
	}
	wg.Wait()
	if n := strings.Count(buf.String(), "\n"); n != 5 {
		t.Errorf("%d lines from 800 calls, want 5", n)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
