package h2

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/backend"
	"relay/internal/core"
)

// PING is answered by a PING ACK carrying the same eight bytes.
func TestPingIsAnswered(t *testing.T) {
	f := startFront(t)
	rc := dialRaw(t, f.addr)
	for _, data := range [][8]byte{{'r', 'e', 'l', 'a', 'y', '-', 't', '1'}, {0, 1, 2, 3, 4, 5, 6, 7}} {
		if err := rc.fr.WritePing(false, data); err != nil {
			t.Fatal(err)
		}
		for {
			p, ok := rc.next().(*http2.PingFrame)
			if !ok {
				continue
			}
			if !p.IsAck() || p.Data != data {
				t.Fatalf("PING answered with ack %v, data %q; want an ACK with %q", p.IsAck(), p.Data, data)
			}
			break
		}
	}
}

// With MaxConcurrentStreams open, one more stream is refused at once,
// never forwarded; the open ones finish and a later stream is served.
func TestStreamsBeyondTheLimitAreRefused(t *testing.T) {
	var reached atomic.Int32
	arrived := make(chan struct{}, 3)
	release := make(chan struct{})
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		io.WriteString(w, "done")
	})
	lim := testLimits()
	lim.MaxConcurrentStreams = 2
	f := startFrontWith(t, testBodyTime, lim, b)
	rc := dialRaw(t, f.addr)
	rc.get(1, "/")
	rc.get(3, "/")
	rc.get(5, "/")
	await(t, arrived, "the first request")
	await(t, arrived, "the second request")
	r5 := rc.response(5)
	close(release)
	if !r5.reset || (r5.code != http2.ErrCodeRefusedStream && r5.code != http2.ErrCodeProtocol) {
		t.Errorf("the third stream: status %d, reset %v (%v); want REFUSED_STREAM or PROTOCOL_ERROR", r5.status, r5.reset, r5.code)
	}
	for id, r := range rc.responses(1, 3) {
		if r.status != 200 || string(r.body) != "done" {
			t.Errorf("stream %d: status %d, body %q; want 200 done", id, r.status, r.body)
		}
	}
	rc.get(7, "/")
	if r := rc.response(7); r.status != 200 {
		t.Errorf("a stream after the others finished: status %d, reset %v (%v)", r.status, r.reset, r.code)
	}
	if n := reached.Load(); n != 3 {
		t.Errorf("%d requests reached the backend, want 3 (the refused one not)", n)
	}
}

// A response head larger than a frame goes out as HEADERS and
// CONTINUATION frames, each within the frame size, that decode to every
// field.
func TestLargeResponseHeadIsSplitIntoContinuation(t *testing.T) {
	const n = 60 // about 50 KB of fields, within relay's 64 KiB response head
	value := func(i int) string { return fmt.Sprintf("%03d-%s", i, strings.Repeat("v", 400)) }
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		for i := range n {
			w.Header().Add(fmt.Sprintf("X-Field-%03d", i), value(i))
			w.Header().Add("X-Repeated", value(i))
		}
		io.WriteString(w, "body")
	})
	f := startFront(t, b)
	check := func(t *testing.T, get func(string) []string) {
		t.Helper()
		for i := range n {
			if v := get(fmt.Sprintf("x-field-%03d", i)); !slices.Equal(v, []string{value(i)}) {
				t.Fatalf("x-field-%03d: %.20q", i, v)
			}
		}
		if v := get("x-repeated"); len(v) != n || v[0] != value(0) || v[n-1] != value(n-1) {
			t.Fatalf("x-repeated: %d values, want %d in order", len(v), n)
		}
	}

	t.Run("frames", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		rc.fr.ReadMetaHeaders = nil // the frames as they are
		rc.get(1, "/")
		var block []byte
		var types []http2.FrameType
		for done := false; !done; {
			switch fr := rc.next().(type) {
			case *http2.HeadersFrame:
				types = append(types, fr.Type)
				block = append(block, fr.HeaderBlockFragment()...)
				done = fr.HeadersEnded()
				if fr.Length > 16384 {
					t.Errorf("HEADERS of %d bytes", fr.Length)
				}
			case *http2.ContinuationFrame:
				types = append(types, fr.Type)
				block = append(block, fr.HeaderBlockFragment()...)
				done = fr.HeadersEnded()
				if fr.Length > 16384 {
					t.Errorf("CONTINUATION of %d bytes", fr.Length)
				}
			}
		}
		want := []http2.FrameType{http2.FrameHeaders}
		for range (len(block) - 1) / 16384 {
			want = append(want, http2.FrameContinuation)
		}
		if len(want) < 3 || !slices.Equal(types, want) {
			t.Errorf("frames %v; want %v for a %d-byte block", types, want, len(block))
		}
		fields, err := hpack.NewDecoder(4096, nil).DecodeFull(block)
		if err != nil {
			t.Fatalf("decoding the header block: %v", err)
		}
		if len(fields) == 0 || fields[0].Name != ":status" || fields[0].Value != "200" {
			t.Fatalf("first field %v, want :status 200", fields[:min(1, len(fields))])
		}
		check(t, func(name string) []string {
			var vs []string
			for _, f := range fields {
				if f.Name == name {
					vs = append(vs, f.Value)
				}
			}
			return vs
		})
	})
	t.Run("Go client", func(t *testing.T) {
		resp, err := h2Client(t).Get(f.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "body" {
			t.Fatalf("status %d, body %q", resp.StatusCode, body)
		}
		check(t, resp.Header.Values)
	})
}

// After relay has answered a request and reset the rest of its body
// (RST_STREAM NO_ERROR), frames the client had already sent on that
// stream must be ignored (RFC 9113 5.1): late DATA, or a late trailer
// section, must not end the connection and its other streams.
func TestFramesAfterRelayResetTheStreamAreIgnored(t *testing.T) {
	b := newBackend(t, "a", nil)
	b.SetDisabled(true) // relay answers 503 without reading the body
	f := startFront(t, b)
	for _, tc := range []struct {
		name string
		late func(rc *rawConn)
	}{
		{"DATA", func(rc *rawConn) { rc.fr.WriteData(1, true, []byte("late body")) }},
		{"trailers", func(rc *rawConn) { rc.writeHeaders(1, true, "x-trailer", "late") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, f.addr)
			rc.writeHeaders(1, false, request("POST", "/")...)
			if r := rc.response(1); r.status != 503 {
				t.Fatalf("status %d, want 503", r.status)
			}
			for {
				if rst, ok := rc.next().(*http2.RSTStreamFrame); ok && rst.StreamID == 1 {
					break
				}
			}
			tc.late(rc)
			rc.fr.WritePing(false, [8]byte{'a', 'l', 'i', 'v', 'e'})
			for {
				fr, err := rc.read()
				if err != nil {
					t.Fatalf("the connection ended: %v", err)
				}
				if g, ok := fr.(*http2.GoAwayFrame); ok {
					t.Fatalf("GOAWAY %v (last stream %d): a frame on a stream relay had reset ended the connection",
						g.ErrCode, g.LastStreamID)
				}
				if p, ok := fr.(*http2.PingFrame); ok && p.IsAck() {
					break
				}
			}
			rc.get(3, "/")
			if r := rc.response(3); r.status != 503 {
				t.Errorf("a later stream: status %d, want 503", r.status)
			}
		})
	}
}

// limitFront serves a backend that holds requests for /hold until
// release is closed, and answers the others at once, with a limit of one
// stream per connection. arrived learns of each held request.
func limitFront(t *testing.T) (f *front, arrived <-chan struct{}, release chan struct{}) {
	held := make(chan struct{}, 16)
	release = make(chan struct{})
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "done")
	})
	lim := testLimits()
	lim.MaxConcurrentStreams = 1
	return startFrontWith(t, testBodyTime, lim, b), held, release
}

// A stream over the limit, from a client that has acknowledged relay's
// SETTINGS, is refused with REFUSED_STREAM, which tells it nothing was
// done and it may try again, not PROTOCOL_ERROR.
func TestStreamOverTheLimitIsRefusedStream(t *testing.T) {
	f, arrived, release := limitFront(t)
	rc := dialRaw(t, f.addr)
	if _, ok := rc.next().(*http2.SettingsFrame); !ok { // and acknowledged
		t.Fatal("relay's first frame is not SETTINGS")
	}
	rc.sync() // relay has the acknowledgement
	rc.get(1, "/hold")
	await(t, arrived, "the first request")
	rc.get(3, "/")
	if r := rc.response(3); !r.reset || r.code != http2.ErrCodeRefusedStream {
		t.Errorf("a stream over the limit of 1: status %d, reset %v (%v); want RST_STREAM REFUSED_STREAM", r.status, r.reset, r.code)
	}
	close(release)
	if r := rc.response(1); r.status != 200 || string(r.body) != "done" {
		t.Errorf("the open stream: status %d, body %q; want 200 done", r.status, r.body)
	}
}

// A stream whose both sides have ended leaves the stream count then, not
// when its goroutine is done: with a limit of one stream, a client that
// got END_STREAM may open its next stream while the last one's goroutine
// still works (here, reporting the circuit breaker its 500 opened), and
// that stream is served, not refused.
func TestEndedStreamLeavesTheCountBeforeItsGoroutineIsDone(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(500)
		}
		io.WriteString(w, "done")
	})
	reporting := make(chan struct{}, 1)
	reported := make(chan struct{})
	defer close(reported)
	lim := testLimits()
	lim.MaxConcurrentStreams = 1
	f := startFrontOpts(t, testBodyTime, lim, frontOptions{pool: func(pc *core.PoolConfig) {
		pc.BreakerFailures, pc.BreakerStatuses, pc.BreakerOpenTime = 1, []int{500}, time.Minute
		pc.MaxEjectedPercent = 100
		pc.OnBreaker = func(_ *backend.Backend, until time.Time, _ string) {
			if until.IsZero() {
				return // closed
			}
			reporting <- struct{}{}
			select { // the stream's goroutine is held here
			case <-reported:
			case <-time.After(ioTimeout):
			}
		}
	}}, b)
	rc := dialRaw(t, f.addr)
	if _, ok := rc.next().(*http2.SettingsFrame); !ok {
		t.Fatal("relay's first frame is not SETTINGS")
	}
	rc.sync()
	rc.get(1, "/fail")
	if r := rc.response(1); r.status != 500 || !r.ended {
		t.Fatalf("the first request: status %d, ended %v, reset %v (%v); want 500", r.status, r.ended, r.reset, r.code)
	}
	await(t, reporting, "the breaker's report") // after the response, by the stream's goroutine
	rc.get(3, "/")
	if r := rc.response(3); r.reset || r.status == 0 {
		t.Errorf("the next stream, opened while the last one's goroutine worked: reset %v (%v); want it served", r.reset, r.code)
	}
}

// A client that got END_STREAM on its only stream may open the next one
// at once, with a limit of one stream: two hundred requests in a row on
// one connection all succeed.
func TestNextStreamMayOpenAsSoonAsTheLastEnded(t *testing.T) {
	f, _, _ := limitFront(t)
	rc := dialRaw(t, f.addr)
	if _, ok := rc.next().(*http2.SettingsFrame); !ok {
		t.Fatal("relay's first frame is not SETTINGS")
	}
	refused := 0
	for i := range 200 {
		id := uint32(2*i + 1)
		rc.get(id, "/")
		r := rc.response(id)
		if r.reset {
			refused++
			if refused <= 3 {
				t.Errorf("request %d: stream reset (%v) right after the previous one ended", i+1, r.code)
			}
			continue
		}
		if r.status != 200 || string(r.body) != "done" {
			t.Fatalf("request %d: status %d, body %q", i+1, r.status, r.body)
		}
	}
	if refused > 0 {
		t.Errorf("%d of 200 requests refused", refused)
	}
}

// Frames a client sent on a stream before it learned that relay refused
// it (REFUSED_STREAM) are ignored, as RFC 9113 5.1 has it: its DATA and
// trailers do not end the connection, nor get a second reset, though
// relay refused more streams meanwhile than it remembered before; the
// stream that was open completes, and the connection serves on.
func TestFramesInFlightForARefusedStreamAreIgnored(t *testing.T) {
	const refused = 16
	f, arrived, release := limitFront(t)
	rc := dialRaw(t, f.addr)
	if _, ok := rc.next().(*http2.SettingsFrame); !ok {
		t.Fatal("relay's first frame is not SETTINGS")
	}
	rc.sync()
	rc.get(1, "/hold")
	await(t, arrived, "the first request")
	// Each refused stream's request, body and trailers are all sent
	// before the client reads relay's answers.
	var ids []uint32
	for i := range refused {
		id := uint32(3 + 2*i)
		ids = append(ids, id)
		rc.writeHeaders(id, false, request("POST", "/")...)
	}
	for _, id := range ids {
		if err := rc.fr.WriteData(id, false, []byte("in flight")); err != nil {
			t.Fatal(err)
		}
		rc.writeHeaders(id, true, "x-trailer", "late")
	}
	resets := map[uint32][]http2.ErrCode{}
	data := [8]byte{'a', 'f', 't', 'e', 'r'}
	if err := rc.fr.WritePing(false, data); err != nil {
		t.Fatal(err)
	}
	for done := false; !done; {
		fr, err := rc.read()
		if err != nil {
			t.Fatalf("the connection ended: %v", err)
		}
		switch fr := fr.(type) {
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v (last stream %d): a frame sent before a refusal was known ended the connection", fr.ErrCode, fr.LastStreamID)
		case *http2.RSTStreamFrame:
			resets[fr.StreamID] = append(resets[fr.StreamID], fr.ErrCode)
		case *http2.PingFrame:
			done = fr.IsAck() && fr.Data == data
		}
	}
	for _, id := range ids {
		if codes := resets[id]; !slices.Equal(codes, []http2.ErrCode{http2.ErrCodeRefusedStream}) {
			t.Errorf("stream %d: resets %v; want one REFUSED_STREAM", id, codes)
		}
	}
	if codes := resets[1]; codes != nil {
		t.Errorf("the open stream was reset: %v", codes)
	}
	close(release)
	if r := rc.response(1); r.status != 200 || string(r.body) != "done" {
		t.Errorf("the open stream: status %d, body %q; want 200 done", r.status, r.body)
	}
	// Relay may not have counted stream 1 out yet when its end arrives
	// (TestNextStreamMayOpenAsSoonAsTheLastEnded).
	cn := serverConn(t, f)
	waitUntil(t, "stream 1 closed", func() bool {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		return len(cn.streams) == 0
	})
	id := uint32(3 + 2*refused)
	rc.get(id, "/")
	if r := rc.response(id); r.status != 200 {
		t.Errorf("a later stream: status %d, reset %v (%v)", r.status, r.reset, r.code)
	}
}
