package logging

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitLimit bounds every wait in these tests so a bug shows up as a failure
// naming what hung, not as the test binary's timeout.
const waitLimit = 10 * time.Second

// collector is a writer that keeps every Write separately, so tests can
// check that the access log only ever writes whole lines.
type collector struct {
	mu     sync.Mutex
	writes [][]byte
	wrote  chan int // receives len(p) after each Write, if not nil
}

func (c *collector) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes = append(c.writes, bytes.Clone(p))
	c.mu.Unlock()
	if c.wrote != nil {
		c.wrote <- len(p)
	}
	return len(p), nil
}

func (c *collector) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Join(c.writes, nil)
}

// lines returns everything written, split into lines without the newline.
func (c *collector) lines() []string {
	s := string(c.bytes())
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// accessLine is the decoded form of one access log line.
type accessLine struct {
	Time       time.Time `json:"time"`
	Level      string    `json:"level"`
	Msg        string    `json:"msg"`
	Client     string    `json:"client"`
	Method     string    `json:"method"`
	Path       string    `json:"path"`
	Proto      string    `json:"proto"`
	TLS        bool      `json:"tls"`
	Status     int       `json:"status"`
	Backend    string    `json:"backend"`
	Pool       string    `json:"pool"`
	Route      string    `json:"route"`
	DurationMS float64   `json:"duration_ms"`
	BytesIn    int64     `json:"bytes_in"`
	BytesOut   int64     `json:"bytes_out"`
	UserAgent  string    `json:"user_agent"`
	Referer    string    `json:"referer"`
	RequestID  string    `json:"request_id"`
	ConnectMS  float64   `json:"upstream_connect_ms"`
	ResponseMS float64   `json:"upstream_response_ms"`
}

func decodeLines(t *testing.T, lines []string) []accessLine {
	t.Helper()
	out := make([]accessLine, len(lines))
	for i, l := range lines {
		d := json.NewDecoder(strings.NewReader(l))
		d.DisallowUnknownFields()
		if err := d.Decode(&out[i]); err != nil {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
	}
	return out
}

func testEntry(i int) *Entry {
	return &Entry{
		Time:     time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond),
		Client:   netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), uint16(40000+i)),
		Method:   []byte("GET"),
		Path:     fmt.Appendf(nil, "/item/%d", i),
		Status:   200 + i%4,
		Backend:  fmt.Sprintf("http://127.0.0.1:%d", 8001+i%3),
		Duration: time.Duration(i) * time.Microsecond,
		BytesIn:  int64(i),
		BytesOut: int64(2 * i),

		UserAgent:        fmt.Appendf(nil, "agent/%d", i),
		Referer:          fmt.Appendf(nil, "https://example.com/%d", i),
		RequestID:        fmt.Appendf(nil, "id-%d", i),
		UpstreamConnect:  time.Duration(i%2) * time.Millisecond,
		UpstreamResponse: time.Duration(i) * 2 * time.Microsecond,
	}
}

func TestAccessLogWritesParsableLines(t *testing.T) {
	var c collector
	a := NewAccessLog(&c)
	const n = 50
	for i := range n {
		a.Log(testEntry(i))
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := decodeLines(t, c.lines())
	if len(got) != n {
		t.Fatalf("got %d lines, want %d", len(got), n)
	}
	for i, l := range got {
		e := testEntry(i)
		want := accessLine{
			Time: e.Time, Level: "INFO", Msg: "access",
			Client: e.Client.String(), Method: "GET", Path: string(e.Path),
			Status: e.Status, Backend: e.Backend, DurationMS: float64(i) / 1000,
			BytesIn: e.BytesIn, BytesOut: e.BytesOut,
			UserAgent: string(e.UserAgent), Referer: string(e.Referer), RequestID: string(e.RequestID),
			ConnectMS: float64(i % 2), ResponseMS: float64(2*i) / 1000,
		}
		if !l.Time.Equal(want.Time) {
			t.Errorf("line %d: time %v, want %v", i, l.Time, want.Time)
		}
		l.Time = want.Time
		if l != want {
			t.Errorf("line %d:\n got %+v\nwant %+v", i, l, want)
		}
	}
	if d := a.Dropped(); d != 0 {
		t.Errorf("Dropped() = %d, want 0", d)
	}
}

func TestAccessLogCopiesEntry(t *testing.T) {
	var c collector
	a := NewAccessLog(&c, WithFlushInterval(time.Hour))
	conn := []byte("POST /first HTTP/1.1")
	e := &Entry{Time: time.Now(), Method: conn[:4], Path: conn[5:11], Status: 201}
	a.Log(e)
	// The proxy reuses its read buffer and its Entry for the next request.
	copy(conn, "GET  /second")
	e.Status = 500
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := decodeLines(t, c.lines())
	if len(got) != 1 || got[0].Method != "POST" || got[0].Path != "/first" || got[0].Status != 201 {
		t.Fatalf("got %+v, want one POST /first 201", got)
	}
}

func TestAccessLogHostilePaths(t *testing.T) {
	tests := []struct {
		name string
		path string
		want string // as decoded by encoding/json
	}{
		{"quote", `/a"b`, `/a"b`},
		{"backslash", `/a\b\\`, `/a\b\\`},
		{"newline forging a line", "/x\"}\n{\"msg\":\"forged\"", "/x\"}\n{\"msg\":\"forged\""},
		{"control characters", "/\x00\x07\x1b[31m\r", "/\x00\x07\x1b[31m\r"},
		{"invalid utf-8", "/\xff\xc3(", "/\ufffd\ufffd("},
		{"truncated rune at end", "/\xe2\x82", "/\ufffd\ufffd"},
		{"unicode", "/ünï/😀", "/ünï/😀"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c collector
			a := NewAccessLog(&c)
			e := testEntry(1)
			e.Path = []byte(tt.path)
			a.Log(e)
			if err := a.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			lines := c.lines()
			if len(lines) != 1 {
				t.Fatalf("got %d lines, want 1: %q", len(lines), lines)
			}
			got := decodeLines(t, lines)[0]
			if got.Path != tt.want || got.Msg != "access" {
				t.Fatalf("path %q msg %q, want path %q msg access", got.Path, got.Msg, tt.want)
			}
		})
	}
}

func TestAccessLogFlushes(t *testing.T) {
	tests := []struct {
		name     string
		opts     []AccessOption
		lines    int
		maxWrite int
	}{
		// One short line and a short interval: the ticker must write it.
		{"on interval", []AccessOption{WithFlushInterval(5 * time.Millisecond), WithFlushSize(1 << 20)}, 1, 1 << 20},
		// An hour-long interval: only crossing the size can explain a write.
		{"on size", []AccessOption{WithFlushInterval(time.Hour), WithFlushSize(1024)}, 20, 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &collector{wrote: make(chan int, 100)}
			a := NewAccessLog(c, tt.opts...)
			defer a.Close()
			for i := range tt.lines {
				a.Log(testEntry(i))
			}
			select {
			case n := <-c.wrote:
				if n > tt.maxWrite {
					t.Errorf("wrote %d bytes at once, want at most %d", n, tt.maxWrite)
				}
			case <-time.After(waitLimit):
				t.Fatal("nothing written before Close")
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, w := range c.writes {
				if len(w) == 0 || w[len(w)-1] != '\n' {
					t.Errorf("write does not end a line: %q", w)
				}
			}
		})
	}
}

func TestAccessLogCloseFlushes(t *testing.T) {
	var c collector
	a := NewAccessLog(&c, WithFlushInterval(time.Hour))
	for i := range 3 {
		a.Log(testEntry(i))
	}
	// Neither the size nor the interval is reached, so nothing can have
	// been written yet.
	if b := c.bytes(); len(b) != 0 {
		t.Fatalf("written before Close: %q", b)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := len(c.lines()); n != 3 {
		t.Fatalf("after Close: %d lines, want 3", n)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	a.Log(testEntry(9))
	if n := len(c.lines()); n != 3 {
		t.Errorf("Log after Close wrote: %d lines, want 3", n)
	}
	if d := a.Dropped(); d != 1 {
		t.Errorf("Dropped() after logging to a closed log = %d, want 1", d)
	}
}

func TestAccessLogWritesWholeLines(t *testing.T) {
	var c collector
	const piece = 512
	a := NewAccessLog(&c, WithFlushSize(piece), WithFlushInterval(time.Hour))
	long := testEntry(0)
	long.Path = bytes.Repeat([]byte("/abcdefgh"), 3*piece/9)
	var want int
	for i := range 40 {
		e := testEntry(i)
		if i%10 == 5 {
			e = long
		}
		a.Log(e)
		want++
	}
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, w := range c.writes {
		if bytes.Count(w, []byte("\n")) == 1 && len(w) > piece {
			continue // a line longer than a piece goes alone
		}
		if len(w) > piece {
			t.Errorf("write of %d bytes holds several lines and exceeds %d", len(w), piece)
		}
		if w[len(w)-1] != '\n' {
			t.Errorf("write does not end a line: %q", w)
		}
	}
	if got := len(decodeLines(t, c.lines())); got != want {
		t.Fatalf("got %d lines, want %d", got, want)
	}
}

// blockingWriter holds every Write until release is closed, like a disk or
// pipe that has stopped draining.
type blockingWriter struct {
	entered chan struct{} // closed at the first Write
	release chan struct{}
	once    sync.Once
	collector
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
	return b.collector.Write(p)
}

func TestAccessLogNeverBlocksOnSlowWriter(t *testing.T) {
	w := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	const maxPending = 16 << 10
	a := NewAccessLog(w, WithMaxPending(maxPending), WithFlushSize(1024), WithFlushInterval(time.Millisecond))
	a.Log(testEntry(0))
	select {
	case <-w.entered:
	case <-time.After(waitLimit):
		t.Fatal("writer never called")
	}
	// The writer is now stuck; logging far more than maxPending must still
	// return, dropping what does not fit.
	const n = 2000
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		for i := 1; i < n; i++ {
			a.Log(testEntry(i))
		}
	}()
	select {
	case <-logged:
	case <-time.After(waitLimit):
		t.Fatal("Log blocked behind a stuck writer")
	}
	dropped := a.Dropped()
	if dropped == 0 {
		t.Fatalf("Dropped() = 0 after %d lines behind a stuck writer", n)
	}
	close(w.release)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	written := uint64(len(decodeLines(t, w.lines())))
	if written+a.Dropped() != n {
		t.Errorf("written %d + dropped %d != logged %d", written, a.Dropped(), n)
	}
	// The line being written, plus at most maxPending waiting behind it.
	if limit := uint64(1 + maxPending/150); written > limit {
		t.Errorf("%d lines were held for a stuck writer, want at most %d", written, limit)
	}
}

type failingWriter struct{ err error }

func (f failingWriter) Write(p []byte) (int, error) { return 0, f.err }

func TestAccessLogCountsFailedWrites(t *testing.T) {
	diskFull := errors.New("no space left on device")
	a := NewAccessLog(failingWriter{diskFull}, WithFlushInterval(time.Hour))
	for i := range 7 {
		a.Log(testEntry(i))
	}
	err := a.Close()
	if !errors.Is(err, diskFull) {
		t.Fatalf("Close() = %v, want it to wrap %v", err, diskFull)
	}
	if d := a.Dropped(); d != 7 {
		t.Fatalf("Dropped() = %d, want 7", d)
	}
}

func TestAccessLogConcurrent(t *testing.T) {
	var c collector
	a := NewAccessLog(&c, WithFlushSize(4096), WithFlushInterval(time.Millisecond))
	const workers, each = 8, 300
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			e := testEntry(w)
			for i := range each {
				e.Path = fmt.Appendf(e.Path[:0], "/w%d/%d", w, i)
				e.Status = 200 + w
				a.Log(e)
			}
		})
	}
	wg.Wait()
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := a.Dropped(); d != 0 {
		t.Fatalf("Dropped() = %d, want 0", d)
	}
	next := make([]int, workers) // each worker's lines must appear in order
	sc := bufio.NewScanner(bytes.NewReader(c.bytes()))
	total := 0
	for sc.Scan() {
		var l accessLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d %q: %v", total, sc.Text(), err)
		}
		var w, i int
		if _, err := fmt.Sscanf(l.Path, "/w%d/%d", &w, &i); err != nil {
			t.Fatalf("path %q: %v", l.Path, err)
		}
		if i != next[w] || l.Status != 200+w {
			t.Fatalf("worker %d: got line %d status %d, want line %d status %d", w, i, l.Status, next[w], 200+w)
		}
		next[w]++
		total++
	}
	if total != workers*each {
		t.Fatalf("got %d lines, want %d", total, workers*each)
	}
}

func TestNilAccessLogIsOff(t *testing.T) {
	var a *AccessLog
	a.Log(testEntry(1))
	if d := a.Dropped(); d != 0 {
		t.Errorf("Dropped() = %d on a nil access log, want 0", d)
	}
	if err := a.Close(); err != nil {
		t.Errorf("Close() = %v on a nil access log, want nil", err)
	}
}
