package h2

import (
	"fmt"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// A SETTINGS frame is acknowledged before any frame that relies on it:
// DATA that a raised SETTINGS_INITIAL_WINDOW_SIZE lets a stream send
// follows the ACK (RFC 9113 6.5.3), as a client that waits for the ACK
// and then for the DATA expects (h2spec's http2/6.9.2/1, which times out
// when the DATA came first). The sequence is h2spec's: the window set to
// 0 and acknowledged, a GET, at once the window raised to 1; the ACK must
// come first, then a DATA frame of one byte. Every other run holds
// relay's write of the response's HEADERS at the socket, as a client
// slow to read would, until relay has the SETTINGS: the stream's
// goroutine then holds the write side while the SETTINGS is applied,
// which is when DATA could slip in ahead of the ACK. Each run has a
// connection of its own and h2spec's two seconds.
func TestRaisedWindowIsAcknowledgedBeforeItsData(t *testing.T) {
	const (
		runs   = 500
		budget = 5 * time.Second
		perRun = 2 * time.Second
	)
	gates := make(chan *gatedConn, runs)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{wrap: func(nc net.Conn) net.Conn {
		g := newGatedConn(nc)
		gates <- g
		return g
	}}, newBackend(t, "a", nil))
	stop := time.Now().Add(budget)
	n := 0
	for ; n < runs && time.Now().Before(stop); n++ {
		held := n%2 == 1
		if err := raiseWindowAfterHeaders(t, f, gates, held, perRun); err != nil {
			t.Fatalf("run %d (head held %v): %v", n, held, err)
		}
	}
	t.Logf("%d runs", n)
}

// raiseWindowAfterHeaders runs h2spec's sequence once on a connection of
// its own, holding relay's write of the response head if held, and
// returns what went wrong within d.
func raiseWindowAfterHeaders(t *testing.T, f *front, gates <-chan *gatedConn, held bool, d time.Duration) error {
	deadline := time.Now().Add(d)
	rc := dialRaw(t, f.addr)
	defer rc.nc.Close()
	rc.nc.SetDeadline(deadline)
	var g *gatedConn
	select {
	case g = <-gates:
	case <-time.After(time.Until(deadline)):
		return fmt.Errorf("relay did not take the connection")
	}
	// The handshake: relay's SETTINGS, read (and acknowledged), and the
	// ACK of the client's.
	for acked, got := false, false; !acked || !got; {
		fr, err := rc.read()
		if err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
		if s, ok := fr.(*http2.SettingsFrame); ok {
			acked, got = acked || s.IsAck(), got || !s.IsAck()
		}
	}
	rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	if err := awaitSettingsAck(rc); err != nil {
		return fmt.Errorf("window 0: %w", err)
	}
	if held {
		g.shut()
	}
	rc.get(1, "/")
	if held {
		select {
		case <-g.blocked:
		case <-time.After(time.Until(deadline)):
			return fmt.Errorf("relay wrote no response head")
		}
	}
	rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
	if held {
		// Let the head go once relay's goroutine reading frames waits
		// for the write side, to acknowledge the SETTINGS.
		c := connOn(f, g)
		for c == nil || c.writers.Load() == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("relay did not take the SETTINGS")
			}
			time.Sleep(50 * time.Microsecond)
			if c == nil {
				c = connOn(f, g)
			}
		}
		g.reopen()
	}
	if err := awaitSettingsAck(rc); err != nil {
		return fmt.Errorf("window 1: %w", err)
	}
	for {
		fr, err := rc.read()
		if err != nil {
			return fmt.Errorf("waiting for DATA after the ACK: %w", err)
		}
		if df, ok := fr.(*http2.DataFrame); ok {
			if df.StreamID != 1 || df.Length != 1 {
				return fmt.Errorf("DATA of %d bytes on stream %d, want 1 byte on stream 1", df.Length, df.StreamID)
			}
			return nil
		}
	}
}

// connOn is relay's connection on nc, if it serves one.
func connOn(f *front, nc net.Conn) *conn {
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	for c := range f.srv.conns {
		if c.nc == nc {
			return c
		}
	}
	return nil
}

// awaitSettingsAck reads until the ACK of the client's SETTINGS; a DATA
// frame before it is a failure.
func awaitSettingsAck(rc *rawConn) error {
	for {
		fr, err := rc.read()
		if err != nil {
			return fmt.Errorf("waiting for the SETTINGS ACK: %w", err)
		}
		switch fr := fr.(type) {
		case *http2.SettingsFrame:
			if fr.IsAck() {
				return nil
			}
		case *http2.DataFrame:
			return fmt.Errorf("DATA of %d bytes on stream %d before the SETTINGS ACK", fr.Length, fr.StreamID)
		}
	}
}
