package h2up

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

func isRST(fr http2.Frame) bool { _, ok := fr.(*http2.RSTStreamFrame); return ok }

// openHeaded opens n streams and writes their heads, the fake reading
// them.
func openHeaded(t *testing.T, c *Conn, f *fake, n int) []*Stream {
	t.Helper()
	var ss []*Stream
	for range n {
		s := c.Open()
		if s == nil {
			t.Fatal("Open refused")
		}
		if err := s.WriteHead(get("/"), true); err != nil {
			t.Fatal(err)
		}
		f.until("HEADERS", isHeaders)
		ss = append(ss, s)
	}
	return ss
}

// The backend's GOAWAY: streams past its last id fail with ErrRefused,
// those at or below it complete, and the connection closes once they
// have ended.
func TestGoAway(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	ss := openHeaded(t, c, f, 3) // ids 1, 3, 5
	unheaded := c.Open()
	f.write(func() { f.fr.WriteGoAway(3, http2.ErrCodeNo, nil) })
	ss[2].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := ss[2].ReadHead(); !errors.Is(err, ErrRefused) {
		t.Fatalf("stream 5 past the GOAWAY: %v, want ErrRefused", err)
	}
	if err := unheaded.WriteHead(get("/"), true); !errors.Is(err, ErrRefused) {
		t.Fatalf("WriteHead after GOAWAY: %v, want ErrRefused", err)
	}
	if c.Usable() || c.Open() != nil {
		t.Fatal("connection takes streams after GOAWAY")
	}
	f.head(1, true, ":status", "200")
	f.head(3, false, ":status", "201")
	f.write(func() { f.fr.WriteData(3, true, []byte("three")) })
	for i, want := range []int{200, 201} {
		s := ss[i]
		s.SetReadDeadline(time.Now().Add(10 * time.Second))
		h, err := s.ReadHead()
		if err != nil || h.Status != want {
			t.Fatalf("stream %d: %+v %v", s.id, h, err)
		}
		if b, err := readAll(t, s); err != nil || (i == 1 && string(b) != "three") {
			t.Fatalf("stream %d body %q %v", s.id, b, err)
		}
	}
	for _, s := range ss {
		s.Close()
	}
	select {
	case <-c.Done():
		t.Fatal("connection ended with a stream open")
	default:
	}
	unheaded.Close()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection still open after its last stream ended")
	}
	if code, ok := f.goAway(); !ok || code != http2.ErrCodeNo {
		t.Fatalf("relay's GOAWAY: %v %v", code, ok)
	}
}

// RST_STREAM REFUSED_STREAM is ErrRefused; another code a StreamError.
func TestBackendReset(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	ss := openHeaded(t, c, f, 2)
	f.write(func() {
		f.fr.WriteRSTStream(1, http2.ErrCodeRefusedStream)
		f.fr.WriteRSTStream(3, http2.ErrCodeInternal)
	})
	ss[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := ss[0].ReadHead(); !errors.Is(err, ErrRefused) {
		t.Fatalf("REFUSED_STREAM: %v", err)
	}
	ss[1].SetReadDeadline(time.Now().Add(10 * time.Second))
	var se StreamError
	if _, err := ss[1].ReadHead(); !errors.As(err, &se) || se.Code != http2.ErrCodeInternal {
		t.Fatalf("INTERNAL_ERROR: %v", err)
	}
	for _, s := range ss {
		s.Close()
	}
	if c.Streams() != 0 || !c.Usable() {
		t.Fatalf("after resets: %d streams, usable %v", c.Streams(), c.Usable())
	}
	// A stream reset by the backend is not reset again: the next frame
	// relay sends is the next stream's head.
	s := c.Open()
	defer s.Close()
	s.WriteHead(get("/"), true)
	if fr := f.next(); !isHeaders(fr) {
		t.Fatalf("after closing reset streams relay sent %v", fr)
	}
}

// Close resets a stream that has not ended both ways, and only such.
func TestCloseResets(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	ss := openHeaded(t, c, f, 2)
	f.head(1, true, ":status", "200")
	ss[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if h, err := ss[0].ReadHead(); err != nil || !h.End {
		t.Fatalf("%+v %v", h, err)
	}
	ss[0].Close() // ended both ways: no reset
	ss[1].Close() // the response never came
	rst := f.next().(*http2.RSTStreamFrame)
	if rst.StreamID != 3 || rst.ErrCode != http2.ErrCodeCancel {
		t.Fatalf("reset %d %v, want 3 CANCEL", rst.StreamID, rst.ErrCode)
	}
}

// A lost connection: streams whose head went out fail with the loss;
// those whose head did not are refused.
func TestConnectionLost(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	ss := openHeaded(t, c, f, 1)
	later := c.Open()
	f.nc.Close()
	ss[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := ss[0].ReadHead(); !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrRefused) {
		t.Fatalf("stream sent before the loss: %v", err)
	}
	<-c.Done()
	if err := later.WriteHead(get("/"), true); !errors.Is(err, ErrRefused) {
		t.Fatalf("head after the loss: %v", err)
	}
	ss[0].Close()
	later.Close()
	if c.Streams() != 0 || c.Usable() {
		t.Fatal("lost connection still counts streams or is usable")
	}
}

// Stream ids go out in increasing order whatever order the streams were
// opened in and however many write their heads at once.
func TestStreamIDsIncrease(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	const n = 50
	ss := make([]*Stream, n)
	for i := range ss {
		ss[i] = c.Open()
	}
	var wg sync.WaitGroup
	for i := n - 1; i >= 0; i-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ss[i].WriteHead(get("/"), true)
		}()
	}
	var last uint32
	for range n {
		h := f.until("HEADERS", isHeaders).(*http2.MetaHeadersFrame)
		if h.StreamID <= last {
			t.Fatalf("stream %d after %d", h.StreamID, last)
		}
		last = h.StreamID
	}
	wg.Wait()
	for _, s := range ss {
		s.Close()
	}
}

// Open stops at the backend's SETTINGS_MAX_CONCURRENT_STREAMS, at
// MaxStreams, and at 100 before the backend's SETTINGS arrive; Close
// frees a place.
func TestStreamLimit(t *testing.T) {
	c, _ := fakeBackend(t, Options{MaxStreams: 5}, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 2})
	a, b := c.Open(), c.Open()
	if a == nil || b == nil || c.Open() != nil {
		t.Fatal("limit of 2 not kept")
	}
	a.Close()
	if a = c.Open(); a == nil {
		t.Fatal("Close did not free a place")
	}
	a.Close()
	b.Close()

	// A backend that says nothing yet.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			t.Cleanup(func() { nc.Close() })
		}
	}()
	c2 := dial(t, ln.Addr().String(), Options{MaxStreams: 500})
	for i := range 100 {
		if c2.Open() == nil {
			t.Fatalf("Open %d refused", i)
		}
	}
	if c2.Open() != nil {
		t.Fatal("more than 100 streams before the backend's SETTINGS")
	}
}

// WriteHead on a draining connection is refused; the connection closes
// with GOAWAY once the last stream ends.
func TestDrain(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	ss := openHeaded(t, c, f, 1)
	unheaded := c.Open()
	c.Drain()
	if c.Usable() || c.Open() != nil {
		t.Fatal("draining connection takes streams")
	}
	if err := unheaded.WriteHead(get("/"), true); !errors.Is(err, ErrRefused) {
		t.Fatalf("WriteHead while draining: %v", err)
	}
	unheaded.Close()
	f.head(1, true, ":status", "200")
	ss[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := ss[0].ReadHead(); err != nil {
		t.Fatalf("the stream open when draining began: %v", err)
	}
	select {
	case <-c.Done():
		t.Fatal("drained with a stream open")
	default:
	}
	ss[0].Close()
	if code, ok := f.goAway(); !ok || code != http2.ErrCodeNo {
		t.Fatalf("GOAWAY %v %v", code, ok)
	}
	<-c.Done()
	if c.IdleSince().IsZero() {
		t.Fatal("IdleSince zero with no stream open")
	}
}
