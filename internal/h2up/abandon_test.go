package h2up

import (
	"errors"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// A connection relay gives up for the backend's fault, while the backend
// still holds it open: the streams still waiting fail at once rather than
// after the linger for the GOAWAY, a response that had come whole stays
// readable, no stream opens on the connection, and streams recycled while
// it lingers do not keep it from ending.
func TestAbandonFailsStreamsAtOnce(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	ss := openHeaded(t, c, f, 2) // ids 1, 3
	f.head(1, false, ":status", "200")
	f.write(func() { f.fr.WriteData(1, true, []byte("whole")) })
	// A WINDOW_UPDATE of 0 on the connection is a connection error
	// (RFC 9113 6.9).
	f.write(func() {
		f.fr.AllowIllegalWrites = true
		f.fr.WriteWindowUpdate(0, 0)
		f.fr.AllowIllegalWrites = false
	})
	start := time.Now()
	ss[1].SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := ss[1].ReadHead()
	if err == nil || errors.Is(err, errReadTimeout) {
		t.Fatalf("stream 3 on the abandoned connection: %v, want it lost", err)
	}
	if took := time.Since(start); took >= lingerTime/2 {
		t.Fatalf("stream 3 failed after %v, want at once, not after the linger", took)
	}
	ss[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if h, err := ss[0].ReadHead(); err != nil || h.Status != 200 {
		t.Fatalf("stream 1's head, which had come: %v %v", h.Status, err)
	}
	if b, err := io.ReadAll(ss[0]); err != nil || string(b) != "whole" {
		t.Fatalf("stream 1's body, which had come: %q %v", b, err)
	}
	if c.Usable() || c.Open() != nil {
		t.Fatal("the abandoned connection takes streams")
	}
	for _, s := range ss {
		s.Recycle()
	}
	if code, ok := f.goAway(); !ok || code != http2.ErrCodeProtocol {
		t.Fatalf("GOAWAY %v %v, want PROTOCOL_ERROR", code, ok)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection did not end once the backend closed it")
	}
	c.mu.Lock()
	open, spare := c.open, len(c.spare)
	c.mu.Unlock()
	if open != 0 || spare > 2 {
		t.Fatalf("after the end: %d streams open, %d kept", open, spare)
	}
}
