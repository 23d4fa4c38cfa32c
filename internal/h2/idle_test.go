package h2

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// idleFront serves a backend answering with h, under a short
// IdleTimeout.
func idleFront(t *testing.T, idle time.Duration, h http.HandlerFunc) *front {
	lim := testLimits()
	lim.IdleTimeout = idle
	return startFrontWith(t, testBodyTime, lim, newBackend(t, "a", h))
}

// A connection with no open stream for IdleTimeout gets GOAWAY NO_ERROR,
// naming the last stream served, and is closed.
func TestIdleConnectionGetsGoAwayAndIsClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	f := idleFront(t, idle, nil)
	for _, tc := range []struct {
		name     string
		requests int
	}{{"never used", 0}, {"after a request", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			since := time.Now() // before relay's connection exists
			rc := dialRaw(t, f.addr)
			rc.nc.SetDeadline(time.Now().Add(20 * idle))
			last := uint32(0)
			for i := range tc.requests {
				last = uint32(2*i + 1)
				rc.get(last, "/")
				if r := rc.response(last); r.status != 200 {
					t.Fatalf("status %d", r.status)
				}
			}
			if tc.requests > 0 {
				since = time.Now()
			}
			g := rc.goAway()
			waited := time.Since(since)
			if g.ErrCode != http2.ErrCodeNo || g.LastStreamID != last {
				t.Errorf("GOAWAY %v, last stream %d; want NO_ERROR and %d", g.ErrCode, g.LastStreamID, last)
			}
			if tc.requests == 0 && waited < idle {
				t.Errorf("GOAWAY after %v, before the idle timeout (%v)", waited, idle)
			}
			if waited > 10*idle {
				t.Errorf("GOAWAY after %v, want within a few idle timeouts (%v)", waited, idle)
			}
			if err := rc.waitClosed(); err != nil {
				t.Errorf("the connection stayed open after GOAWAY: %v", err)
			}
		})
	}
}

// A connection whose client says nothing while a stream is open is not
// idle: relay PINGs it instead of closing it, and the client that answers
// gets its response.
func TestSilentClientWithAnOpenStreamIsPinged(t *testing.T) {
	const idle = 300 * time.Millisecond
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	f := idleFront(t, idle, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "late")
	})
	rc := dialRaw(t, f.addr)
	rc.nc.SetDeadline(time.Now().Add(20 * idle))
	rc.get(1, "/")
	await(t, arrived, "the request")
	since := time.Now()
	for {
		fr := rc.next() // answers the PING
		if p, ok := fr.(*http2.PingFrame); ok && !p.IsAck() {
			break
		}
		switch fr := fr.(type) {
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v with a stream open", fr.ErrCode)
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset (%v) while the backend works", fr.ErrCode)
		}
	}
	if waited := time.Since(since); waited > 10*idle {
		t.Errorf("PING after %v of silence, want within a few idle timeouts (%v)", waited, idle)
	}
	close(release)
	if r := rc.response(1); r.status != 200 || string(r.body) != "late" {
		t.Errorf("after the PING: status %d, body %q; want 200 late", r.status, r.body)
	}
}

// A new connection whose client does not send its preface and SETTINGS
// within HeaderTimeout is closed; one that did is not held to it.
func TestHeaderTimeoutClosesASilentNewConnection(t *testing.T) {
	const wait = 300 * time.Millisecond
	lim := testLimits()
	lim.HeaderTimeout = wait
	f := startFrontWith(t, testBodyTime, lim, newBackend(t, "a", nil))

	t.Run("silent", func(t *testing.T) {
		since := time.Now()
		nc, err := net.DialTimeout("tcp", f.addr, ioTimeout)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(20 * wait))
		_, err = io.Copy(io.Discard, nc) // relay's SETTINGS, then the end
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("still open after %v: %v", time.Since(since), err)
		}
		if took := time.Since(since); took < wait {
			t.Errorf("closed after %v, before the header timeout (%v)", took, wait)
		}
	})
	t.Run("preface sent", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		if _, ok := rc.next().(*http2.SettingsFrame); !ok {
			t.Fatal("relay's first frame is not SETTINGS")
		}
		// Silence well past the header timeout: nothing to wait for but
		// the time itself.
		time.Sleep(3 * wait)
		rc.get(1, "/")
		if r := rc.response(1); r.status != 200 {
			t.Errorf("status %d after the header timeout had passed", r.status)
		}
	})
}

// waitPing reads frames until relay PINGs (read answers it), failing on a
// GOAWAY or a reset of stream 1.
func waitPing(t *testing.T, rc *rawConn) {
	t.Helper()
	for {
		switch fr := rc.next().(type) {
		case *http2.PingFrame:
			if !fr.IsAck() {
				return
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v while waiting for a PING", fr.ErrCode)
		case *http2.RSTStreamFrame:
			t.Fatalf("stream %d reset (%v) while waiting for a PING", fr.StreamID, fr.ErrCode)
		}
	}
}

// The idle watch goes on at its pace after a PING the client answered: a
// stream whose client then grants no window is reset within a few idle
// timeouts of its stall, and a connection that then goes idle gets its
// GOAWAY within a few idle timeouts, not only when a PING would have
// timed out.
func TestIdleWatchKeepsItsPaceAfterAPing(t *testing.T) {
	const idle = 300 * time.Millisecond
	release := make(chan []byte)
	arrived := make(chan struct{}, 1)
	f := idleFront(t, idle, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		var body []byte
		select {
		case body = <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(10*len(body)))
		if len(body) == 0 {
			return
		}
		w.Write(body)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the rest never comes
	})

	const bound = 10 * idle // "a few idle timeouts", generously

	t.Run("stalled stream", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		rc.autoWindow = false
		rc.get(1, "/")
		await(t, arrived, "the request")
		waitPing(t, rc)
		release <- bytes.Repeat([]byte("s"), 128<<10) // more than the 65535-byte window
		since := time.Now()
		rc.nc.SetDeadline(since.Add(bound))
		for {
			fr, err := rc.read()
			if err != nil {
				t.Fatalf("stream 1 not reset %v after it stalled (idle timeout %v): %v", time.Since(since), idle, err)
			}
			if r, ok := fr.(*http2.RSTStreamFrame); ok && r.StreamID == 1 {
				break
			}
			if g, ok := fr.(*http2.GoAwayFrame); ok {
				t.Fatalf("GOAWAY %v instead of a reset stream", g.ErrCode)
			}
		}
	})
	t.Run("idle connection", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		rc.get(1, "/")
		await(t, arrived, "the request")
		waitPing(t, rc)
		release <- []byte{}
		if r := rc.response(1); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
		since := time.Now()
		rc.nc.SetDeadline(since.Add(bound))
		for {
			fr, err := rc.read()
			if err != nil {
				t.Fatalf("no GOAWAY %v after the connection went idle (idle timeout %v): %v", time.Since(since), idle, err)
			}
			if g, ok := fr.(*http2.GoAwayFrame); ok {
				if g.ErrCode != http2.ErrCodeNo {
					t.Errorf("GOAWAY %v, want NO_ERROR", g.ErrCode)
				}
				break
			}
		}
	})
}
