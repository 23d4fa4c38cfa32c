package h2

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/backend"
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

// trickleReader reads at most per bytes every every: a client that takes
// its response slowly but steadily.
type trickleReader struct {
	r     io.Reader
	per   int
	every time.Duration
	next  time.Time
}

func (tr *trickleReader) Read(p []byte) (int, error) {
	if d := time.Until(tr.next); d > 0 {
		time.Sleep(d) // the client's pace
	}
	tr.next = time.Now().Add(tr.every)
	return tr.r.Read(p[:min(len(p), tr.per)])
}

// slowReader is a client of f with windows as large as can be, which
// asks for a response and then sends nothing, not even an answer to a
// PING, and reads what comes per bytes every 50 ms. It calls check after
// each frame, and fails on a PING, a GOAWAY, a reset or the end of the
// connection, for as long as d. It returns how many body bytes it read.
func slowReader(t *testing.T, f *front, per int, d time.Duration, check func(http2.Frame)) (took int) {
	t.Helper()
	rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow})
	if err := rc.fr.WriteWindowUpdate(0, maxWindow-65535); err != nil {
		t.Fatal(err)
	}
	rc.get(1, "/")
	start := time.Now()
	rc.nc.SetReadDeadline(start.Add(d + ioTimeout))
	fr := http2.NewFramer(nil, bufio.NewReaderSize(&trickleReader{r: rc.nc, per: per, every: 50 * time.Millisecond}, per))
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for time.Since(start) < d {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the connection ended after %v, %d body bytes read: %v", time.Since(start).Round(time.Millisecond), took, err)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			took += len(f.Data())
			if f.StreamEnded() {
				t.Fatalf("the response ended after %d bytes: too short for the test", took)
			}
		case *http2.PingFrame:
			t.Fatalf("relay PINGed a client taking its bytes, %v after it started reading (%d bytes)", time.Since(start).Round(time.Millisecond), took)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v after %v", f.ErrCode, time.Since(start).Round(time.Millisecond))
		case *http2.RSTStreamFrame:
			t.Fatalf("the stream was reset (%v) after %v", f.ErrCode, time.Since(start).Round(time.Millisecond))
		}
		if check != nil {
			check(f)
		}
	}
	return took
}

// pacedBackend answers with a body of 1 GiB, which it writes piece by
// piece, one every every (0: as fast as it goes), and closes cut when
// relay stops taking it.
func pacedBackend(t *testing.T, piece int, every time.Duration, cut chan<- struct{}) *backend.Backend {
	p := pattern(piece)
	return newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(1<<30))
		for range (1 << 30) / piece {
			if _, err := w.Write(p); err != nil {
				if cut != nil {
					close(cut)
				}
				return
			}
			if every > 0 {
				w.(http.Flusher).Flush()
				time.Sleep(every) // the backend's pace
			}
		}
	})
}

// The bytes a client takes are a sign of life: a client that sends
// nothing, not even an answer to a PING, while it reads a long response a
// few KiB every 50 ms, as fast as the backend sends it, is not PINGed by
// the idle watch, which would close it pingTimeout later.
func TestClientTakingItsBytesIsNotPinged(t *testing.T) {
	const idle = 200 * time.Millisecond
	for _, tc := range []struct {
		name  string
		piece int           // the backend's writes
		every time.Duration // and their pace
		per   int           // what the client reads every 50 ms
	}{
		{name: "small DATA frames", piece: 1 << 10, every: 20 * time.Millisecond, per: 4 << 10},
		// A full-size frame is written around relay's write buffer.
		{name: "full-size DATA frames", piece: 32 << 10, every: 50 * time.Millisecond, per: 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := testLimits()
			lim.IdleTimeout = idle
			f := startFrontWith(t, testBodyTime, lim, pacedBackend(t, tc.piece, tc.every, nil))
			took := slowReader(t, f, tc.per, 4*time.Second, nil)
			t.Logf("%d bytes taken in 4s", took)
		})
	}
}

// A client that reads its response slowly but steadily, a few KiB every
// 50 ms, and sends nothing, is not closed while it reads, although a PING
// relay sends it sits behind megabytes of its data: a write to such a
// client completes only once a large part of a socket buffer of up to
// several MiB has drained, which takes it longer than pingTimeout, and
// meanwhile the watch sees a write waiting rather than a silent client.
func TestSlowReaderIsNotClosed(t *testing.T) {
	const idle = 200 * time.Millisecond
	cut := make(chan struct{})
	lim := testLimits()
	lim.IdleTimeout = idle
	f := startFrontWith(t, testBodyTime, lim, pacedBackend(t, 32<<10, 0, cut))
	d := pingTimeout + 2*time.Second
	took := slowReader(t, f, 4<<10, d, func(http2.Frame) {
		select {
		case <-cut:
			t.Fatalf("relay closed the connection while its client was reading")
		default:
		}
	})
	t.Logf("%d bytes taken in %v", took, d)
}
