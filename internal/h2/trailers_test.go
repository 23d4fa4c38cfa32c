package h2

import (
	"bufio"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// A chunked response's trailer section leaves as a HEADERS frame with
// END_STREAM after DATA frames that do not end the stream: names in lower
// case, values trimmed, without fields no trailer may carry or that the
// response's Connection field names. A chunked response without trailers
// ends on its last DATA frame, with no HEADERS after it.
func TestResponseTrailersEndTheStream(t *testing.T) {
	b := rawBackend(t, func(w *bufio.Writer, req *http.Request) {
		w.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: X-Hop\r\n\r\n5\r\nhello\r\n")
		if req.URL.Path == "/trailers" {
			w.WriteString("0\r\nGrpc-Status: 0\r\nX-Sum:  42 \r\nX-Hop: 1\r\nContent-Length: 9\r\nSet-Cookie: a=1\r\nProxy-Foo: 1\r\nIf-Match: *\r\n\r\n")
		} else if req.URL.Path == "/forbidden-only" {
			w.WriteString("0\r\nContent-Length: 9\r\nTE: trailers\r\n\r\n")
		} else {
			w.WriteString("0\r\n\r\n")
		}
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	rc.get(1, "/trailers")
	r := rc.response(1)
	if r.status != 200 || string(r.body) != "hello" || !r.ended {
		t.Fatalf("status %d, body %q, ended %v", r.status, r.body, r.ended)
	}
	if last := r.frames[len(r.frames)-1]; last != http2.FrameHeaders {
		t.Errorf("frames %v: the stream did not end with HEADERS", r.frames)
	}
	var got []string
	for _, hf := range r.trailers {
		got = append(got, hf.Name+"="+hf.Value)
	}
	if want := []string{"grpc-status=0", "x-sum=42"}; !slices.Equal(got, want) {
		t.Errorf("trailers %q, want %q", got, want)
	}

	for i, path := range []string{"/none", "/forbidden-only"} {
		id := uint32(2*i + 3)
		rc.get(id, path)
		r = rc.response(id)
		if r.status != 200 || string(r.body) != "hello" || !r.ended {
			t.Fatalf("%s: status %d, body %q, ended %v", path, r.status, r.body, r.ended)
		}
		heads := 0
		for _, ft := range r.frames {
			if ft == http2.FrameHeaders {
				heads++
			}
		}
		if heads != 1 || r.frames[len(r.frames)-1] != http2.FrameData {
			t.Errorf("%s: frames %v, want one HEADERS and the end on DATA", path, r.frames)
		}
	}
}

// A backend's malformed trailer section breaks the response off: the
// client sees its stream reset, not a complete response.
func TestMalformedResponseTrailersResetTheStream(t *testing.T) {
	b := rawBackend(t, func(w *bufio.Writer, req *http.Request) {
		w.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nBad Name: 1\r\n\r\n")
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	rc.get(1, "/")
	if r := rc.response(1); !r.reset || r.ended {
		t.Errorf("frames %v, reset %v (%v): want the stream reset", r.frames, r.reset, r.code)
	}
}

// A client's trailer section larger than max_header_bytes resets its
// stream, and the backend sees the body cut short; one within it follows
// the last chunk.
func TestRequestTrailersAreBounded(t *testing.T) {
	started, got := make(chan struct{}, 2), make(chan string, 2)
	b := newBackend(t, "b", func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			got <- "cut short"
			return
		}
		got <- "X-Sum " + r.Trailer.Get("X-Sum")
	})
	lim := testLimits()
	lim.MaxHeaderBytes = 4096
	f := startFrontWith(t, testBodyTime, lim, b)
	rc := dialRaw(t, f.addr)
	for i, value := range []string{"7", strings.Repeat("v", 4096)} {
		id := uint32(2*i + 1)
		rc.writeHeaders(id, false, request("POST", "/")...)
		if err := rc.fr.WriteData(id, false, []byte("body")); err != nil {
			t.Fatal(err)
		}
		// The backend is reading the body when the trailers come.
		await(t, started, "the backend's request")
		rc.writeHeaders(id, true, "x-sum", value)
		r := rc.response(id)
		backendGot := await(t, got, "the end of the backend's request")
		if i == 0 {
			if r.status != 200 || backendGot != "X-Sum 7" {
				t.Errorf("status %d, backend got %q; want 200 and X-Sum 7", r.status, backendGot)
			}
			continue
		}
		if !r.reset || r.code != http2.ErrCodeProtocol || backendGot != "cut short" {
			t.Errorf("oversized trailers: reset %v (%v), backend got %q; want PROTOCOL_ERROR and the body cut short", r.reset, r.code, backendGot)
		}
	}
}

// The trailer sections a connection's open streams hold count against the
// header lists one connection may hold, and may not take them past its
// bound: a client that sends a large trailer section on each of its
// streams, whose requests wait on their backend, gets the streams past
// the bound reset with ENHANCE_YOUR_CALM, and the others are served.
func TestRequestTrailersWithinHeldBound(t *testing.T) {
	release := make(chan struct{})
	// A backend that answers once released, whatever the body holds
	// (Go's server refuses trailer sections this large).
	b := rawBackend(t, func(w *bufio.Writer, req *http.Request) {
		select {
		case <-release:
		case <-time.After(ioTimeout):
		}
		w.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	})
	lim := testLimits()
	lim.MaxConcurrentStreams, lim.MaxHeaderBytes = 16, 16<<10
	f := startFrontWith(t, testBodyTime, lim, b)
	answer := sync.OnceFunc(func() { close(release) })
	defer answer()
	rc := dialRaw(t, f.addr)
	big := strings.Repeat("v", 15000)
	var ids []uint32
	for i := range lim.MaxConcurrentStreams {
		id := uint32(2*i + 1)
		ids = append(ids, id)
		rc.writeHeaders(id, false, request("POST", "/")...)
		if err := rc.fr.WriteData(id, false, []byte("body")); err != nil {
			t.Fatal(err)
		}
	}
	// Every stream is open, holding little, when the trailers come.
	for _, id := range ids {
		rc.writeHeaders(id, true, "x-big", big)
	}
	// Every frame above has been read once the PING is answered.
	reset := map[uint32]bool{}
	for _, h := range rc.sync() {
		if h.Type == http2.FrameRSTStream {
			reset[h.StreamID] = true
		}
	}
	c := serverConn(t, f)
	c.mu.Lock()
	held, limit := c.fb.held, c.fb.heldLimit
	c.mu.Unlock()
	if held > limit {
		t.Errorf("the open streams hold %d bytes of header lists and trailers, past the connection's bound of %d", held, limit)
	}
	if len(reset) == 0 || len(reset) == len(ids) {
		t.Fatalf("%d of %d streams reset; want those past the bound only", len(reset), len(ids))
	}
	var served []uint32
	for _, id := range ids {
		if !reset[id] {
			served = append(served, id)
		}
	}
	answer()
	for id, r := range rc.responses(served...) {
		if r.status != 200 || string(r.body) != "ok" {
			t.Errorf("stream %d: status %d, body %q, reset %v (%v)", id, r.status, r.body, r.reset, r.code)
		}
	}
}

// The fields a response's Connection field names stay behind in its
// trailers even when the body arrives after the head, in reads that
// overwrite the head's bytes in the backend connection's buffer.
func TestResponseTrailersConnectionAfterLaterReads(t *testing.T) {
	more := make(chan struct{})
	b := rawBackend(t, func(w *bufio.Writer, req *http.Request) {
		w.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: X-Hop\r\n\r\n")
		if w.Flush() != nil {
			return
		}
		select {
		case <-more:
		case <-time.After(ioTimeout):
			return
		}
		body := strings.Repeat("a", 200)
		w.WriteString("c8\r\n" + body + "\r\n0\r\nX-Hop: 1\r\nX-Sum: 42\r\n\r\n")
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	rc.get(1, "/")
	// relay has read the head, alone, once the client has it.
	var body []byte
	var trailers []string
	for headers, ended := 0, false; !ended; {
		switch fr := rc.next().(type) {
		case *http2.MetaHeadersFrame:
			if fr.StreamID != 1 {
				continue
			}
			headers++
			if headers == 1 {
				close(more)
			} else {
				for _, hf := range fr.RegularFields() {
					trailers = append(trailers, hf.Name+"="+hf.Value)
				}
			}
			ended = fr.StreamEnded()
		case *http2.DataFrame:
			if fr.StreamID == 1 {
				body = append(body, fr.Data()...)
				ended = fr.StreamEnded()
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset (%v)", fr.ErrCode)
		}
	}
	if len(body) != 200 {
		t.Errorf("body of %d bytes, want 200", len(body))
	}
	if want := []string{"x-sum=42"}; !slices.Equal(trailers, want) {
		t.Errorf("trailers %q, want %q: X-Hop is named by the head's Connection field", trailers, want)
	}
}
