package h2

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// Response bytes reach the client as the backend sends them, not when
// the response ends.
func TestStreamsResponse(t *testing.T) {
	release := make(chan struct{})
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "second\n")
	})
	f := startFront(t, b)
	resp, err := h2Client(t).Get(f.url + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(release)
	if line, err = br.ReadString('\n'); err != nil || line != "second\n" {
		t.Fatalf("second line %q, %v", line, err)
	}
}

// A backend that dies mid-body must not give the client a response that
// looks complete: the stream is reset, never ended.
func TestResetsABrokenResponse(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		io.WriteString(w, "only part of it")
		w.(http.Flusher).Flush()
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
	})
	f := startFront(t, b)

	t.Run("frames", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		rc.get(1, "/")
		r := rc.response(1)
		if r.ended || !r.reset {
			t.Fatalf("status %d, body %q, ended %v, reset %v; want the stream reset, not ended",
				r.status, r.body, r.ended, r.reset)
		}
		if r.status != 200 || string(r.body) != "only part of it" {
			t.Errorf("before the reset: status %d, body %q", r.status, r.body)
		}
	})
	t.Run("Go client", func(t *testing.T) {
		resp, err := h2Client(t).Get(f.url + "/")
		if err != nil {
			return // cut off before the head: also not a complete response
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Fatal("the client read a complete response from a backend that died mid-body")
		}
	})
}

// cancelWatch is a backend that starts a response (head and
// bodyFirst, of a body ten times as long) if bodyFirst is not nil, and
// then waits; it reports when its request arrived and when it saw it
// cancelled. front serves it.
type cancelWatch struct {
	front     *front
	arrived   chan struct{}
	cancelled chan time.Time
}

// newCancelWatch starts a cancelWatch backend and a front for it, whose
// limits lim may change.
func newCancelWatch(t *testing.T, bodyFirst []byte, lim func(*Limits)) *cancelWatch {
	cw := &cancelWatch{arrived: make(chan struct{}, 1), cancelled: make(chan time.Time, 1)}
	done := make(chan struct{})
	b := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		if bodyFirst != nil {
			w.Header().Set("Content-Length", strconv.Itoa(10*len(bodyFirst)))
			w.Write(bodyFirst)
			w.(http.Flusher).Flush()
		}
		cw.arrived <- struct{}{}
		select {
		case <-r.Context().Done():
			cw.cancelled <- time.Now()
		case <-done:
		}
	})
	t.Cleanup(func() { close(done) }) // before the backend closes
	limits := testLimits()
	if lim != nil {
		lim(&limits)
	}
	cw.front = startFrontWith(t, testBodyTime, limits, b)
	return cw
}

// within checks that the backend saw its request cancelled within d of
// gaveUp.
func (cw *cancelWatch) within(t *testing.T, gaveUp time.Time, d time.Duration) {
	t.Helper()
	select {
	case at := <-cw.cancelled:
		if late := at.Sub(gaveUp); late > d {
			t.Errorf("the backend saw the cancel %v after the client, want within %v", late, d)
		}
	case <-time.After(ioTimeout):
		t.Fatal("the backend never saw the upstream request cancelled")
	}
}

// A client that cancels its request (Go's client resets the stream)
// cancels the upstream request, long before relay's response timeout.
func TestCancelledRequestCancelsUpstream(t *testing.T) {
	cw := newCancelWatch(t, nil, nil)
	f := cw.front
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.url+"/", nil)
	go func() {
		select {
		case <-cw.arrived:
		case <-time.After(ioTimeout):
		}
		cancel()
	}()
	if resp, err := h2Client(t).Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the cancelled request got %d", resp.StatusCode)
	}
	cw.within(t, time.Now(), 2*time.Second)
}

// RST_STREAM from the client in the middle of a response ends the
// backend's request, though the backend is not sending anything.
func TestClientResetMidResponseEndsBackendRequest(t *testing.T) {
	part := bytes.Repeat([]byte("p"), 4096)
	cw := newCancelWatch(t, part, nil)
	f := cw.front
	rc := dialRaw(t, f.addr)
	rc.get(1, "/")
	await(t, cw.arrived, "the backend's request")
	var got int
	for got < len(part) {
		switch fr := rc.next().(type) {
		case *http2.DataFrame:
			if fr.StreamID == 1 {
				got += len(fr.Data())
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("the stream was reset (%v) before the client reset it", fr.ErrCode)
		}
	}
	if err := rc.fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	gaveUp := time.Now()
	cw.within(t, gaveUp, 2*time.Second)

	// The connection goes on.
	rc.writeHeaders(3, true, request("GET", "/")...)
	await(t, cw.arrived, "the second request")
	if err := rc.fr.WriteRSTStream(3, http2.ErrCodeCancel); err != nil {
		t.Fatal(err)
	}
	cw.within(t, time.Now(), 2*time.Second)
}

// A client that sends its body as fast as relay takes it is not timed
// out because the backend is slow to take the body: the body's idle time
// bounds a wait for the client, not the time between reads.
func TestABackendSlowToTakeTheBodyDoesNotTimeOutTheClient(t *testing.T) {
	b := newBackend(t, "slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(1500 * time.Millisecond) // three times the body idle time
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		io.WriteString(w, strconv.FormatInt(n, 10))
	})
	f := startFrontWith(t, core.BodyTime{Idle: 500 * time.Millisecond}, testLimits(), b)
	const size = 32 << 20
	body := bytes.Repeat([]byte("x"), size)
	resp, err := h2Client(t).Post(f.url+"/up", "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != strconv.Itoa(size) {
		t.Errorf("status %d, body %.60q; want 200 and %d", resp.StatusCode, got, size)
	}
}
