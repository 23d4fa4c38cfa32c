package h2

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
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
