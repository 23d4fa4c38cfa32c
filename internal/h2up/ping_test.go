package h2up

import (
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// relay answers the backend's PINGs.
func TestAnswersPing(t *testing.T) {
	_, f := fakeBackend(t, Options{})
	data := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	f.write(func() { f.fr.WritePing(false, data) })
	p := f.until("PING ACK", func(fr http2.Frame) bool { _, ok := fr.(*http2.PingFrame); return ok }).(*http2.PingFrame)
	if !p.IsAck() || p.Data != data {
		t.Fatalf("answer %+v", p)
	}
}

// Ping keeps a backend that answers, and closes one that does not.
func TestPing(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	c.Ping(5 * time.Second)
	p := f.until("PING", func(fr http2.Frame) bool { _, ok := fr.(*http2.PingFrame); return ok }).(*http2.PingFrame)
	if p.IsAck() {
		t.Fatal("relay's PING is an ACK")
	}
	f.write(func() { f.fr.WritePing(true, p.Data) })
	waitFor(t, "the ACK taken", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return !c.pingOut
	})
	// The next PING goes unanswered.
	start := time.Now()
	c.Ping(100 * time.Millisecond)
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection open after an unanswered PING")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("closed after %v, before the PING's timeout", d)
	}
}

// ReadHead and Read wait until the read deadline, and the stream stays
// usable after it; LastActive follows the stream's frames.
func TestReadDeadline(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	s := c.Open()
	defer s.Close()
	s.WriteHead(get("/"), true)
	f.until("HEADERS", isHeaders)
	before := s.LastActive()
	s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := s.ReadHead(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadHead: %v", err)
	}
	// A deadline moved while ReadHead waits is taken at once.
	done := make(chan error, 1)
	go func() {
		_, err := s.ReadHead()
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	s.SetReadDeadline(time.Now().Add(-time.Second))
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("ReadHead: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadHead did not see its deadline moved")
	}
	time.Sleep(2 * time.Millisecond)
	f.head(1, false, ":status", "200")
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	if h, err := s.ReadHead(); err != nil || h.Status != 200 {
		t.Fatalf("ReadHead after a deadline: %+v %v", h, err)
	}
	if !s.LastActive().After(before) {
		t.Fatal("LastActive did not move with the head")
	}
	s.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := s.Read(make([]byte, 10)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read: %v", err)
	}
	f.write(func() { f.fr.WriteData(1, true, []byte("late")) })
	if b, err := readAll(t, s); string(b) != "late" || err != nil {
		t.Fatalf("Read after a deadline: %q %v", b, err)
	}
}

// IdleSince is zero while a stream is open, and the time the last one
// ended after.
func TestIdleSince(t *testing.T) {
	c, _ := fakeBackend(t, Options{})
	start := c.IdleSince()
	if start.IsZero() {
		t.Fatal("IdleSince zero on a new connection")
	}
	s := c.Open()
	if !c.IdleSince().IsZero() {
		t.Fatal("IdleSince not zero with a stream open")
	}
	time.Sleep(2 * time.Millisecond)
	s.Close()
	if !c.IdleSince().After(start) {
		t.Fatal("IdleSince did not move when the last stream ended")
	}
}
