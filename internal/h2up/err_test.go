package h2up

import (
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// Err says why a connection takes no new stream: nil while it takes
// them, the backend's GOAWAY (not relay's close that follows it), the
// protocol error relay gave the connection up for, relay's Drain and
// relay's Close.
func TestErrSaysWhyNoStream(t *testing.T) {
	t.Run("taking streams", func(t *testing.T) {
		c, _ := fakeBackend(t, Options{})
		if err := c.Err(); err != nil {
			t.Fatalf("Err of a usable connection: %v", err)
		}
	})
	t.Run("GOAWAY", func(t *testing.T) {
		c, f := fakeBackend(t, Options{})
		f.write(func() { f.fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
		if _, ok := f.goAway(); !ok {
			t.Fatal("relay sent no GOAWAY after the backend's")
		}
		<-c.Done()
		if err := c.Err(); err != errBackendGoAway {
			t.Fatalf("Err after the backend's GOAWAY: %v, want %v", err, errBackendGoAway)
		}
	})
	t.Run("protocol error", func(t *testing.T) {
		c, f := fakeBackend(t, Options{})
		f.write(func() {
			f.fr.AllowIllegalWrites = true
			f.fr.WriteWindowUpdate(0, 0)
		})
		if code, ok := f.goAway(); !ok || code != http2.ErrCodeProtocol {
			t.Fatalf("GOAWAY %v %v, want PROTOCOL_ERROR", code, ok)
		}
		if err := c.Err(); err == nil || !strings.Contains(err.Error(), "the backend broke the protocol") {
			t.Fatalf("Err after a protocol error: %v, want it to say the backend broke the protocol", err)
		}
		if c.Open() != nil {
			t.Fatal("the connection given up takes a stream")
		}
	})
	t.Run("drain", func(t *testing.T) {
		c, _ := fakeBackend(t, Options{})
		s := c.Open()
		c.Drain()
		if err := c.Err(); err != errDraining {
			t.Fatalf("Err while draining: %v, want %v", err, errDraining)
		}
		s.Close()
	})
	t.Run("close", func(t *testing.T) {
		c, _ := fakeBackend(t, Options{})
		c.Close()
		if err := c.Err(); err != errClosedByRelay {
			t.Fatalf("Err after Close: %v, want %v", err, errClosedByRelay)
		}
	})
}
