package h2

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// pattern is n bytes that are not all alike, so a byte lost, doubled or
// moved shows.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// digestBackend answers with the length and SHA-256 of the body it got.
func digestBackend(t *testing.T) *front {
	b := newBackend(t, "digest", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	return startFront(t, b)
}

func digest(b []byte) string { return fmt.Sprintf("%d %x", len(b), sha256.Sum256(b)) }

// A 2 MiB request body, twice relay's stream and connection windows,
// arrives whole at the backend: relay gives the window back as the
// backend takes the bytes.
func TestUploadLargerThanTheWindowsArrivesWhole(t *testing.T) {
	const size = 2 << 20
	body := pattern(size)
	f := digestBackend(t)

	t.Run("Go client", func(t *testing.T) {
		resp, err := h2Client(t).Post(f.url+"/up", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != digest(body) {
			t.Fatalf("status %d, backend got %q; want %q", resp.StatusCode, got, digest(body))
		}
	})

	// A client that sends exactly what the windows relay grants allow,
	// counting the WINDOW_UPDATEs that let it go on.
	t.Run("frames", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		if _, ok := rc.next().(*http2.SettingsFrame); !ok {
			t.Fatal("relay's first frame is not SETTINGS")
		}
		streamWin, ok := rc.settings[http2.SettingInitialWindowSize]
		if !ok {
			streamWin = 65535
		}
		sw, cw := int64(streamWin), int64(65535)
		rc.writeHeaders(1, false, request("POST", "/up", "content-length", strconv.Itoa(size))...)
		var updates int
		for sent := 0; sent < size; {
			if n := min(int64(size-sent), sw, cw, 16384); n > 0 {
				end := sent+int(n) == size
				if err := rc.fr.WriteData(1, end, body[sent:sent+int(n)]); err != nil {
					t.Fatal(err)
				}
				sent += int(n)
				sw -= n
				cw -= n
				continue
			}
			switch fr := rc.next().(type) {
			case *http2.WindowUpdateFrame:
				updates++
				if fr.StreamID == 0 {
					cw += int64(fr.Increment)
				} else if fr.StreamID == 1 {
					sw += int64(fr.Increment)
				}
			case *http2.RSTStreamFrame:
				t.Fatalf("stream reset (%v) after %d of %d bytes", fr.ErrCode, sent, size)
			case *http2.GoAwayFrame:
				t.Fatalf("GOAWAY (%v) after %d of %d bytes", fr.ErrCode, sent, size)
			}
		}
		r := rc.response(1)
		if r.status != 200 || string(r.body) != digest(body) {
			t.Fatalf("status %d, backend got %q; want %q", r.status, r.body, digest(body))
		}
		if updates == 0 {
			t.Error("2 MiB went through with no WINDOW_UPDATE")
		}
	})
}

// A client that starts with small windows and grants more step by step
// gets the whole 1 MiB response, and relay never sends more than the
// windows allow: on the stream, or on the connection.
func TestDownloadStaysWithinTheWindowsGranted(t *testing.T) {
	const size = 1 << 20
	want := pattern(size)
	b := newBackend(t, "big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(want)
	})
	f := startFront(t, b)
	// steps are the increments granted each time a window runs out.
	steps := []uint32{1000, 1, 4000, 16384, 20000, 333}

	cases := []struct {
		name     string
		initial  uint32 // SETTINGS_INITIAL_WINDOW_SIZE
		byStream bool   // the stream's window is the one granted by hand
		byConn   bool   // the connection's window is
	}{
		{name: "stream window", initial: 1000, byStream: true},
		{name: "connection window", initial: 2 << 20, byConn: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: tc.initial})
			rc.autoWindow = false
			rc.get(1, "/big")
			sw, cw := int64(tc.initial), int64(65535)
			var got []byte
			var grants, frames int
			for ended := false; !ended; {
				switch fr := rc.next().(type) {
				case *http2.MetaHeadersFrame:
					if s := fr.PseudoValue("status"); s != "200" {
						t.Fatalf("status %s", s)
					}
				case *http2.DataFrame:
					n := int64(fr.Length)
					if n > sw || n > cw {
						t.Fatalf("a DATA frame of %d bytes with %d of stream window and %d of connection window left (after %d bytes)",
							n, sw, cw, len(got))
					}
					if n > 16384 {
						t.Fatalf("a DATA frame of %d bytes, over the 16384 the client accepts", n)
					}
					sw -= n
					cw -= n
					frames++
					got = append(got, fr.Data()...)
					ended = fr.StreamEnded()
				case *http2.RSTStreamFrame:
					t.Fatalf("stream reset (%v) after %d bytes", fr.ErrCode, len(got))
				case *http2.GoAwayFrame:
					t.Fatalf("GOAWAY (%v) after %d bytes", fr.ErrCode, len(got))
				}
				if ended {
					break
				}
				// Grant more only once a window is used up: relay must
				// use all it was given, and no more.
				step := steps[grants%len(steps)]
				switch {
				case tc.byStream && sw == 0:
					grants++
					rc.fr.WriteWindowUpdate(1, step)
					sw += int64(step)
					if cw < int64(step) {
						rc.fr.WriteWindowUpdate(0, 1<<20)
						cw += 1 << 20
					}
				case tc.byConn && cw == 0:
					grants++
					rc.fr.WriteWindowUpdate(0, step)
					cw += int64(step)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes, want the backend's %d (equal: %v)", len(got), len(want), bytes.Equal(got, want))
			}
			if grants < 10 {
				t.Errorf("only %d grants: the windows never ran out", grants)
			}
			t.Logf("%d DATA frames, %d grants", frames, grants)
		})
	}
}

// A client that grants no window beyond the initial one has its stream
// reset within a few idle timeouts, and the backend's request ends.
func TestStreamOfAClientGrantingNoWindowIsReset(t *testing.T) {
	const idle = 300 * time.Millisecond
	cw := newCancelWatch(t, bytes.Repeat([]byte("w"), 128<<10), func(l *Limits) { l.IdleTimeout = idle })
	f := cw.front
	rc := dialRaw(t, f.addr)
	rc.autoWindow = false
	rc.get(1, "/")
	await(t, cw.arrived, "the backend's request")
	var got int64
	start := time.Now()
	for {
		fr := rc.next()
		if d, ok := fr.(*http2.DataFrame); ok && d.StreamID == 1 {
			got += int64(d.Length)
			if d.StreamEnded() {
				t.Fatal("the stream ended: the response fit in the initial window")
			}
		}
		if r, ok := fr.(*http2.RSTStreamFrame); ok && r.StreamID == 1 {
			break
		}
		if g, ok := fr.(*http2.GoAwayFrame); ok {
			t.Fatalf("GOAWAY (%v) instead of a reset stream", g.ErrCode)
		}
	}
	took := time.Since(start)
	if got > 65535 {
		t.Errorf("relay sent %d bytes in a 65535-byte window", got)
	}
	if took > 10*idle {
		t.Errorf("the stream was reset %v after the window ran out; want within a few idle timeouts (%v)", took, idle)
	}
	cw.within(t, time.Now(), 2*time.Second)
}

// A stream stopped by a window of zero resumes when the client raises
// SETTINGS_INITIAL_WINDOW_SIZE instead of sending WINDOW_UPDATE: the
// change applies to open streams (RFC 9113 6.9.2).
func TestSettingsChangeOpensTheWindowsOfOpenStreams(t *testing.T) {
	const size = 100 << 10
	want := pattern(size)
	b := newBackend(t, "big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(want)
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.fr.WriteWindowUpdate(0, 1<<20)
	rc.get(1, "/")
	for head := false; !head; {
		switch fr := rc.next().(type) {
		case *http2.MetaHeadersFrame:
			head = fr.StreamID == 1
		case *http2.DataFrame:
			t.Fatalf("%d bytes of DATA in a window of 0", fr.Length)
		}
	}
	// Nothing more comes while the window is 0.
	for _, h := range rc.sync() {
		if h.Type == http2.FrameData {
			t.Fatalf("%d bytes of DATA in a window of 0", h.Length)
		}
	}
	rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	if r := rc.response(1); !r.ended || !bytes.Equal(r.body, want) {
		t.Fatalf("after the SETTINGS: %d bytes, ended %v; want the %d bytes", len(r.body), r.ended, size)
	}
}
