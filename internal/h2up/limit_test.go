package h2up

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// TestReadLimits checks the read side's bounds, which are fixed only
// when a wait begins: a limit already passed fails a read that has to
// wait at once, a watch counts from the wait's start, one set while the
// reader waits applies to that wait, and a read that finds its answer
// returns it whatever the limit.
func TestReadLimits(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	s := c.Open()
	defer s.Close()
	if err := s.WriteHead(get("/"), true); err != nil {
		t.Fatal(err)
	}
	f.until("HEADERS", isHeaders)

	// A limit already passed: no wait, no hang.
	s.SetReadLimit(time.Now().Add(-time.Second), time.Hour)
	start := time.Now()
	if _, err := s.ReadHead(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadHead past its limit: %v, want os.ErrDeadlineExceeded", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("ReadHead past its limit took %v", took)
	}

	// A watch counts from the wait's start, not from when it was set.
	s.SetReadLimit(time.Time{}, 200*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	start = time.Now()
	if _, err := s.ReadHead(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadHead with a watch: %v", err)
	}
	if took := time.Since(start); took < 150*time.Millisecond || took > 5*time.Second {
		t.Fatalf("a wait with a watch of 200ms, set 300ms before, took %v", took)
	}

	// A watch set while the reader waits ends that wait.
	s.SetReadLimit(time.Now().Add(time.Hour), 0)
	done := make(chan error, 1)
	go func() {
		_, err := s.ReadHead()
		done <- err
	}()
	waitFor(t, "the reader to wait", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return s.rwaiting
	})
	s.SetReadLimit(time.Time{}, 50*time.Millisecond)
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("ReadHead after a watch set while it waited: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a watch set while the reader waited did not end the wait")
	}

	// An answer that has come is read whatever the limit.
	f.head(s.id, false, ":status", "200")
	waitFor(t, "the head", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return s.final
	})
	f.write(func() { f.fr.WriteData(s.id, false, []byte("body")) })
	waitFor(t, "the body", func() bool { return s.Buffered() == 4 })
	s.SetReadLimit(time.Now().Add(-time.Second), time.Hour)
	if h, err := s.ReadHead(); err != nil || h.Status != 200 {
		t.Fatalf("ReadHead with the head there, past the limit: %v, %v", h.Status, err)
	}
	buf := make([]byte, 10)
	if n, err := s.Read(buf); n != 4 || err != nil {
		t.Fatalf("Read with bytes there, past the limit: %d, %v", n, err)
	}
	if n, err := s.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read with nothing there, past the limit: %d, %v", n, err)
	}
}

// TestWriteTimeoutCountsFromTheWait checks that the write side's watch
// bounds a wait for flow-control window, counted from the wait's start.
func TestWriteTimeoutCountsFromTheWait(t *testing.T) {
	c, f := fakeBackend(t, Options{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 10})
	s := c.Open()
	defer s.Close()
	if err := s.WriteHead(post("/"), false); err != nil {
		t.Fatal(err)
	}
	f.until("HEADERS", isHeaders)
	s.SetWriteTimeout(200 * time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	n, err := s.Write(make([]byte, 100))
	if n != 10 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past the window: %d, %v", n, err)
	}
	if took := time.Since(start); took < 150*time.Millisecond || took > 5*time.Second {
		t.Fatalf("a wait for window with a watch of 200ms, set 300ms before, took %v", took)
	}
	// A limit already passed fails the next wait at once.
	s.SetWriteDeadline(time.Now().Add(-time.Second))
	start = time.Now()
	if _, err := s.Write(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past its deadline: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a Write past its deadline took %v", took)
	}
}

// TestRecycledStreamKeepsNoWatch checks that a stream kept for the
// connection's next Open starts with no bound of its last use: a watch
// set and never used, which would otherwise bound a wait of a request
// that set none.
func TestRecycledStreamKeepsNoWatch(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	s := c.Open()
	if err := s.WriteHead(get("/"), true); err != nil {
		t.Fatal(err)
	}
	f.until("HEADERS", isHeaders)
	f.head(s.id, true, ":status", "204")
	if _, err := s.ReadHead(); err != nil {
		t.Fatal(err)
	}
	s.SetReadLimit(time.Now().Add(time.Hour), time.Millisecond)
	s.SetWriteTimeout(time.Millisecond)
	s.Recycle()
	again := c.Open()
	if again != s {
		t.Fatal("the recycled stream was not kept for the next Open")
	}
	defer again.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !again.rdl.IsZero() || again.rwatch != 0 || !again.wdl.IsZero() || again.wwatch != 0 {
		t.Fatalf("a recycled stream kept its bounds: rdl %v rwatch %v wdl %v wwatch %v", again.rdl, again.rwatch, again.wdl, again.wwatch)
	}
}
