package h2

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/fds"
)

// mixBackend answers by path with every kind of response a tail must get
// right: a body whole with its head (/small), one of known length that
// comes in two parts (/ahead, read ahead), one too long to hold (/long),
// a chunked one with a trailer (/chunked), none (/204, /304), and one
// after 103 Early Hints (/hints).
func mixBackend(t *testing.T) (b []byte, answer func(w *bufio.Writer, req *http.Request)) {
	body := pattern(200 << 10)
	return body, func(w *bufio.Writer, req *http.Request) {
		head := req.Method == "HEAD"
		send := func(n int) {
			fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", n)
			if !head {
				w.Write(body[:n])
			}
		}
		switch req.URL.Path {
		case "/small":
			send(2000)
		case "/ahead":
			fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", 40<<10)
			w.Write(body[:100])
			w.Flush()
			time.Sleep(time.Millisecond) // the rest after the head
			w.Write(body[100 : 40<<10])
		case "/long":
			send(len(body))
		case "/chunked":
			fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n%x\r\n", 3000)
			w.Write(body[:3000])
			w.WriteString("\r\n0\r\nX-Sum: 1\r\n\r\n")
		case "/204":
			w.WriteString("HTTP/1.1 204 No Content\r\n\r\n")
		case "/304":
			w.WriteString("HTTP/1.1 304 Not Modified\r\nContent-Length: 500\r\n\r\n")
		case "/hints":
			w.WriteString("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
			send(3000)
		}
	}
}

// streamLog is what one stream got, frame by frame.
type streamLog struct {
	path      string
	method    string
	heads     []int // statuses of HEADERS, in order
	body      []byte
	ends      int  // frames with END_STREAM
	after     bool // a frame came after END_STREAM or RST_STREAM
	dataEarly bool // DATA before the final HEADERS
	reset     bool
	code      http2.ErrCode
}

func (s *streamLog) over() bool { return s.ends > 0 || s.reset }

// A client that grants no window to streams of every kind of response,
// cancels some of them while their tails wait, and then opens its window
// gets each of the others complete and in order: its HEADERS (after any
// 1xx), its body whole, END_STREAM exactly once and nothing after it.
// The bytes held for tails come back to nothing, and so do the places in
// the descriptor budget.
func TestTailsKeepEveryResponseInOrder(t *testing.T) {
	body, answer := mixBackend(t)
	budget := fds.New(1000)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{descriptors: budget}, rawBackend(t, answer))
	rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.autoWindow = false
	rc.fr.WriteWindowUpdate(0, 16<<20)
	rc.sync()
	c := serverConn(t, f)
	tails := func() int64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.tails
	}
	kinds := []struct{ method, path string }{
		{"GET", "/small"}, {"GET", "/ahead"}, {"GET", "/long"}, {"GET", "/chunked"},
		{"GET", "/204"}, {"GET", "/304"}, {"GET", "/hints"}, {"HEAD", "/small"}, {"HEAD", "/ahead"},
	}
	logs := map[uint32]*streamLog{}
	var id uint32 = 1
	for range 8 {
		for _, k := range kinds {
			rc.writeHeaders(id, true, request(k.method, k.path)...)
			logs[id] = &streamLog{path: k.path, method: k.method}
			id += 2
		}
	}
	read := func() {
		t.Helper()
		f, err := rc.read()
		if err != nil {
			t.Fatalf("reading a frame: %v", err)
		}
		s := logs[f.Header().StreamID]
		if s == nil {
			return
		}
		if s.over() {
			s.after = true
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			st, _ := strconv.Atoi(f.PseudoValue("status"))
			s.heads = append(s.heads, st)
			if f.StreamEnded() {
				s.ends++
			}
		case *http2.DataFrame:
			if len(s.heads) == 0 || s.heads[len(s.heads)-1] < 200 {
				s.dataEarly = true
			}
			s.body = append(s.body, f.Data()...)
			if f.StreamEnded() {
				s.ends++
			}
		case *http2.RSTStreamFrame:
			s.reset, s.code = true, f.ErrCode
		}
	}
	// Every response head arrives, with no window for any body.
	heads := func() bool {
		for _, s := range logs {
			if len(s.heads) == 0 || s.heads[len(s.heads)-1] < 200 {
				return false
			}
		}
		return true
	}
	for !heads() {
		read()
	}
	waitUntil(t, "the tails to be held", func() bool { return tails() > 0 })
	// Cancel a third of the streams while they wait.
	cancelled := map[uint32]bool{}
	for id := range logs {
		if id%3 == 0 {
			rc.fr.WriteRSTStream(id, http2.ErrCodeCancel)
			cancelled[id] = true
		}
	}
	rc.autoWindow = true
	rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	over := func() bool {
		for id, s := range logs {
			if !cancelled[id] && !s.over() {
				return false
			}
		}
		return true
	}
	for !over() {
		read()
	}
	rc.sync() // anything written after an end has arrived by now
	for id, s := range logs {
		if cancelled[id] {
			continue
		}
		want := map[string]int{"/small": 2000, "/ahead": 40 << 10, "/long": 200 << 10, "/chunked": 3000, "/hints": 3000}[s.path]
		if s.method == "HEAD" {
			want = 0
		}
		status := s.heads[len(s.heads)-1]
		switch {
		case s.reset:
			t.Errorf("stream %d (%s %s) reset with %v", id, s.method, s.path, s.code)
		case s.ends != 1 || s.after:
			t.Errorf("stream %d (%s %s): END_STREAM %d times, frames after the end %v", id, s.method, s.path, s.ends, s.after)
		case s.dataEarly:
			t.Errorf("stream %d (%s %s): DATA before its HEADERS", id, s.method, s.path)
		case s.path == "/hints" && (len(s.heads) != 2 || s.heads[0] != 103):
			t.Errorf("stream %d: HEADERS %v, want 103 then 200", id, s.heads)
		case !bytes.Equal(s.body, body[:want]):
			t.Errorf("stream %d (%s %s): status %d, %d bytes of body, want %d", id, s.method, s.path, status, len(s.body), want)
		}
	}
	waitUntil(t, "the bytes held for tails to come back", func() bool { return tails() == 0 })
	waitUntil(t, "every place in the budget to come back", func() bool {
		f.core.CloseIdle()
		return budget.Used() == 0
	})
}

// A client that never grants window to a held tail has its stream reset
// after the idle timeout, and what the tail held comes back.
func TestStalledTailIsResetAndGivesBack(t *testing.T) {
	_, answer := mixBackend(t)
	lim := testLimits()
	lim.IdleTimeout = 300 * time.Millisecond
	f := startFrontWith(t, testBodyTime, lim, rawBackend(t, answer))
	rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.sync()
	c := serverConn(t, f)
	rc.get(1, "/small")
	rc.get(3, "/ahead")
	start := time.Now()
	rs := rc.responses(1, 3)
	for id, r := range rs {
		if !r.reset || r.code != http2.ErrCodeInternal || r.status != 200 || len(r.body) != 0 {
			t.Fatalf("stream %d: status %d, %d bytes, reset %v (%v); want its head, then RST_STREAM INTERNAL_ERROR", id, r.status, len(r.body), r.reset, r.code)
		}
	}
	if took := time.Since(start); took > 3*lim.IdleTimeout {
		t.Fatalf("stalled tails reset after %v; want within twice the idle timeout of %v", took, lim.IdleTimeout)
	}
	waitUntil(t, "the bytes held for tails to come back", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.tails == 0
	})
}

// A client that closes its connection while tails wait ends them: their
// streams' goroutines return and what they held comes back.
func TestTailsEndWithTheirConnection(t *testing.T) {
	_, answer := mixBackend(t)
	budget := fds.New(1000)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{descriptors: budget}, rawBackend(t, answer))
	rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.sync()
	c := serverConn(t, f)
	var ids []uint32
	for i := range 30 {
		id := uint32(2*i + 1)
		rc.get(id, []string{"/small", "/ahead", "/hints"}[i%3])
		ids = append(ids, id)
	}
	got := 0
	for got < len(ids) {
		if h, ok := rc.next().(*http2.MetaHeadersFrame); ok && h.PseudoValue("status") == "200" {
			got++
		}
	}
	waitUntil(t, "the tails to be held", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.tails > 0 && c.running == len(ids)
	})
	rc.nc.Close()
	waitUntil(t, "the streams to end and give back what they held", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.tails == 0 && c.running == 0
	})
	waitUntil(t, "every place in the budget to come back", func() bool {
		f.core.CloseIdle()
		return budget.Used() == 0
	})
}
