package h2up

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// A stream whose reader stops holds no more than its window, and the
// other streams on the connection go on.
func TestStalledReaderStallsNoOtherStream(t *testing.T) {
	big := bytes.Repeat([]byte("b"), 4<<20)
	addr := h2cServer(t, &http2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write(big)
			return
		}
		w.Write(bytes.Repeat([]byte("s"), 300<<10))
	}))
	const window = 64 << 10
	c := dial(t, addr, Options{StreamWindow: window, MaxStreams: 4})
	stuck := c.Open()
	defer stuck.Close()
	if err := stuck.WriteHead(get("/big"), true); err != nil {
		t.Fatal(err)
	}
	// Other streams, one after the other, each longer than the stuck
	// stream's window: they would stall behind it were the connection's
	// window not given back as DATA arrives.
	for i := range 8 {
		s := c.Open()
		if err := s.WriteHead(get("/small"), true); err != nil {
			t.Fatal(err)
		}
		s.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := s.ReadHead(); err != nil {
			t.Fatal(err)
		}
		b, err := readAll(t, s)
		if err != nil || len(b) != 300<<10 {
			t.Fatalf("stream %d: %d bytes, %v", i, len(b), err)
		}
		s.Close()
	}
	waitFor(t, "the stuck stream's window to fill", func() bool { return stuck.Buffered() == window })
	time.Sleep(50 * time.Millisecond) // what would come past the window
	if n := stuck.Buffered(); n != window {
		t.Fatalf("stuck stream holds %d bytes, window %d", n, window)
	}
	if cap(stuck.buf) > window {
		t.Fatalf("stuck stream's buffer grew to %d bytes, window %d", cap(stuck.buf), window)
	}
	// Reading gives the window back, and the body comes whole.
	stuck.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := stuck.ReadHead(); err != nil {
		t.Fatal(err)
	}
	b, err := readAll(t, stuck)
	if err != nil || !bytes.Equal(b, big) {
		t.Fatalf("big body: %d bytes, %v", len(b), err)
	}
}

// Write waits for window until its deadline, then goes on when the
// backend grants some; a raised SETTINGS_INITIAL_WINDOW_SIZE applies to
// open streams; DATA frames keep within the backend's frame size.
func TestWriteWaitsForWindow(t *testing.T) {
	c, f := fakeBackend(t, Options{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	s := c.Open()
	defer s.Close()
	if err := s.WriteHead(post("/"), false); err != nil {
		t.Fatal(err)
	}
	f.until("HEADERS", isHeaders)
	s.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	n, err := s.Write(make([]byte, 40000))
	if n != 10 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past the window: %d, %v", n, err)
	}
	// The stream stays usable.
	s.SetWriteDeadline(time.Now().Add(10 * time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := s.Write(make([]byte, 40000))
		done <- err
	}()
	f.write(func() {
		f.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 30000})
		f.fr.WriteWindowUpdate(s.id, 20000)
	})
	got := 0
	for got < 40010 {
		fr := f.next()
		if d, ok := fr.(*http2.DataFrame); ok {
			if len(d.Data()) > 16384 {
				t.Fatalf("DATA of %d bytes, over the frame size", len(d.Data()))
			}
			got += len(d.Data())
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	sw, cw := s.sendWin, c.sendWin
	c.mu.Unlock()
	if sw != 10+20000+(30000-10)-40010 || cw != 65535-40010 {
		t.Fatalf("send windows: stream %d, connection %d", sw, cw)
	}
}

// A backend that sends past the window it was given: the stream is
// reset, or for the connection's window the connection ends.
func TestReceiveOverflow(t *testing.T) {
	c, f := fakeBackend(t, Options{StreamWindow: 1000})
	s := c.Open()
	defer s.Close()
	if err := s.WriteHead(get("/"), true); err != nil {
		t.Fatal(err)
	}
	h := f.until("HEADERS", isHeaders).(*http2.MetaHeadersFrame)
	f.head(h.StreamID, false, ":status", "200")
	f.write(func() { f.fr.WriteData(h.StreamID, false, make([]byte, 1001)) })
	rst := f.until("RST_STREAM", func(fr http2.Frame) bool { _, ok := fr.(*http2.RSTStreamFrame); return ok }).(*http2.RSTStreamFrame)
	if rst.ErrCode != http2.ErrCodeFlowControl {
		t.Fatalf("reset with %v", rst.ErrCode)
	}
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.ReadHead(); err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(t, s); err == nil || !strings.Contains(err.Error(), "window") {
		t.Fatalf("Read after overflow: %v", err)
	}
	if n := s.Buffered(); n != 0 {
		t.Fatalf("overflowing DATA buffered: %d", n)
	}

	// The connection's window is given back as DATA arrives, 32 KiB at
	// a time, so a backend can pass it only by more than a frame past a
	// stream's window, which that stream's check sees first; the
	// connection's check is seen with the window made small here.
	c2, f2 := fakeBackend(t, Options{StreamWindow: 1000})
	s2 := c2.Open()
	defer s2.Close()
	s2.WriteHead(get("/"), true)
	h = f2.until("HEADERS", isHeaders).(*http2.MetaHeadersFrame)
	c2.mu.Lock()
	c2.recvWin = 500
	c2.mu.Unlock()
	f2.head(h.StreamID, false, ":status", "200")
	f2.write(func() { f2.fr.WriteData(h.StreamID, false, make([]byte, 600)) })
	if code, ok := f2.goAway(); !ok || code != http2.ErrCodeFlowControl {
		t.Fatalf("GOAWAY %v %v, want FLOW_CONTROL_ERROR", code, ok)
	}
	<-c2.Done()
}

// A WINDOW_UPDATE that takes a window past 2^31-1 is a flow-control
// error: of the stream for a stream's, of the connection for its own.
func TestWindowUpdateOverflow(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	s := c.Open()
	defer s.Close()
	s.WriteHead(post("/"), false)
	h := f.until("HEADERS", isHeaders).(*http2.MetaHeadersFrame)
	f.write(func() { f.fr.WriteWindowUpdate(h.StreamID, maxWindow) })
	rst := f.until("RST_STREAM", func(fr http2.Frame) bool { _, ok := fr.(*http2.RSTStreamFrame); return ok }).(*http2.RSTStreamFrame)
	if rst.ErrCode != http2.ErrCodeFlowControl {
		t.Fatalf("reset with %v", rst.ErrCode)
	}
	if _, err := s.Write([]byte("x")); err == nil {
		t.Fatal("Write on a reset stream succeeded")
	}
	if !c.Usable() {
		t.Fatal("a stream's overflow cost the connection")
	}
	f.write(func() { f.fr.WriteWindowUpdate(0, maxWindow) })
	if code, ok := f.goAway(); !ok || code != http2.ErrCodeFlowControl {
		t.Fatalf("GOAWAY %v %v, want FLOW_CONTROL_ERROR", code, ok)
	}
	<-c.Done()
}

// A write that has spent the connection's window waits for the backend's
// WINDOW_UPDATE of the connection, and goes on when it comes.
func TestWriteWaitsForConnectionWindow(t *testing.T) {
	c, f := fakeBackend(t, Options{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	s := c.Open()
	defer s.Close()
	s.WriteHead(post("/"), false)
	f.until("HEADERS", isHeaders)
	s.SetWriteDeadline(time.Now().Add(10 * time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := s.Write(make([]byte, 100000))
		done <- err
	}()
	got := 0
	for got < initialWindow {
		if d, ok := f.next().(*http2.DataFrame); ok {
			got += len(d.Data())
		}
	}
	waitFor(t, "the writer to wait for the connection's window", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.waiters) == 1
	})
	f.write(func() { f.fr.WriteWindowUpdate(0, 100000) })
	for got < 100000 {
		if d, ok := f.next().(*http2.DataFrame); ok {
			got += len(d.Data())
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Close while a write waits for window: the write fails at once, and the
// window it had taken is the connection's again.
func TestCloseWakesWaitingWrite(t *testing.T) {
	c, f := fakeBackend(t, Options{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
	s := c.Open()
	s.WriteHead(post("/"), false)
	f.until("HEADERS", isHeaders)
	s.SetWriteDeadline(time.Now().Add(time.Minute))
	done := make(chan error, 1)
	go func() {
		_, err := s.Write(make([]byte, 1000))
		done <- err
	}()
	f.until("DATA", func(fr http2.Frame) bool { _, ok := fr.(*http2.DataFrame); return ok })
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Write on a closed stream succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Write still waiting after Close")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sendWin != initialWindow-100 || c.open != 0 || len(c.waiters) != 0 {
		t.Fatalf("connection window %d, %d places, %d waiters", c.sendWin, c.open, len(c.waiters))
	}
}
