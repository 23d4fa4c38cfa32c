package h2up

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// countingConn counts the writes to the socket.
type countingConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestHoldSendsARequestInOneWrite checks that a request's head, body and
// end written under Hold reach the socket in one write, and that a body
// larger than the backend's window still goes out whole: the wait for
// credit releases what is held first.
func TestHoldSendsARequestInOneWrite(t *testing.T) {
	addr := h2cServer(t, &http2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Write([]byte{byte(n >> 16), byte(n >> 8), byte(n)})
	}))
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingConn{Conn: nc}
	c, err := Start(cc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close(); <-c.Done() }()
	for _, size := range []int{100, 200 << 10} {
		// Settle the connection's own frames (SETTINGS ACK and the like)
		// with a first request.
		s := c.Open()
		s.SetWriteDeadline(time.Now().Add(5 * time.Second))
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if err := s.WriteHead(post("/"), true); err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(t, s); err != nil {
			t.Fatal(err)
		}
		s.Close()

		s = c.Open()
		s.SetWriteDeadline(time.Now().Add(5 * time.Second))
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		before := cc.writes.Load()
		s.Hold()
		if err := s.WriteHead(post("/"), false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write(bytes.Repeat([]byte("x"), size)); err != nil {
			t.Fatal(err)
		}
		if err := s.CloseWrite(nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(); err != nil {
			t.Fatal(err)
		}
		writes := cc.writes.Load() - before
		if _, err := s.ReadHead(); err != nil {
			t.Fatal(err)
		}
		body, err := readAll(t, s)
		if err != nil || len(body) != 3 || int(body[0])<<16|int(body[1])<<8|int(body[2]) != size {
			t.Fatalf("%d bytes sent: the backend answered %v, %v", size, body, err)
		}
		s.Close()
		if size < 16<<10 && writes != 1 {
			t.Errorf("a request of %d bytes took %d writes under Hold, want 1", size, writes)
		}
	}
}

// TestSettledWhenTheBackendsSettingsCome checks that Settled closes once
// the backend's SETTINGS are applied, with its stream limit in force.
func TestSettledWhenTheBackendsSettingsCome(t *testing.T) {
	addr := h2cServer(t, &http2.Server{MaxConcurrentStreams: 2}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	c := dial(t, addr, Options{})
	select {
	case <-c.Settled():
	case <-time.After(5 * time.Second):
		t.Fatal("no SETTINGS from the backend")
	}
	if n := c.MaxStreams(); n != 2 {
		t.Errorf("MaxStreams %d after the backend's SETTINGS, want 2", n)
	}
	a, b := c.Open(), c.Open()
	if a == nil || b == nil || c.Open() != nil {
		t.Errorf("the connection took %v, %v and a third stream past the backend's limit of 2", a != nil, b != nil)
	}
	a.Close()
	b.Close()
}
