package h2

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// A frame that has begun to arrive, and a header block whose HEADERS has,
// must arrive whole within HeaderTimeout, not IdleTimeout: relay sends
// GOAWAY ENHANCE_YOUR_CALM and closes the connection. Another client is
// served meanwhile.
func TestUnfinishedFrameOrHeaderBlockIsCutOffAtTheHeaderTimeout(t *testing.T) {
	const wait = 300 * time.Millisecond
	lim := testLimits()
	lim.HeaderTimeout = wait
	lim.IdleTimeout = time.Minute
	f := startFrontWith(t, testBodyTime, lim, newBackend(t, "a", nil))

	// block is a request's header block, long enough to drip for
	// longer than the test waits, encoded as for a new connection.
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, hf := range requestFields("GET", "/") {
		enc.WriteField(hf)
	}
	enc.WriteField(hpack.HeaderField{Name: "x-drip", Value: strings.Repeat("a", 1000)})
	block := buf.Bytes()
	cases := []struct {
		name string
		// start sends the beginning; drip, if not nil, is then called
		// every wait/6 until it fails or the connection ends.
		start func(rc *rawConn) error
		drip  func(rc *rawConn, i int) error
	}{
		{name: "half a frame header", start: func(rc *rawConn) error {
			_, err := rc.nc.Write([]byte{0, 0, 8, 0x6, 0})
			return err
		}},
		{name: "half a payload", start: func(rc *rawConn) error {
			_, err := rc.nc.Write([]byte{0, 0, 8, 0x6, 0, 0, 0, 0, 0, 'h', 'a', 'l'})
			return err
		}},
		{name: "header block left open", start: func(rc *rawConn) error {
			return rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true})
		}},
		{name: "header block dripped", start: func(rc *rawConn) error {
			return rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:1], EndStream: true})
		}, drip: func(rc *rawConn, i int) error {
			// Whole frames, each in time, one byte of the block at a
			// time, never ending it.
			return rc.fr.WriteContinuation(1, false, block[1+i:2+i])
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, f.addr)
			if _, ok := rc.next().(*http2.SettingsFrame); !ok {
				t.Fatal("relay's first frame is not SETTINGS")
			}
			rc.sync() // relay has read the client's SETTINGS whole
			since := time.Now()
			if err := tc.start(rc); err != nil {
				t.Fatal(err)
			}
			drip := tc.drip
			if drip == nil {
				drip = func(*rawConn, int) error { return nil }
			}
			r := flood(t, rc, int(ioTimeout/(wait/6)), func(i int) error {
				time.Sleep(wait / 6) // the client's pace
				return drip(rc, i)
			})
			took := time.Since(since)
			r.cutOff(t, tc.name)
			if took < wait || took > 10*wait {
				t.Errorf("closed after %v; want the header timeout, %v", took, wait)
			}
			servesAnother(t, f)
		})
	}

	// Frames that arrive whole are not held to it, however long between
	// them: a request body sent in pieces with pauses.
	t.Run("whole frames with pauses", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		rc.writeHeaders(1, false, request("POST", "/")...)
		for _, piece := range []string{"slow ", "but ", "whole"} {
			time.Sleep(2 * wait) // the client's pace
			if err := rc.fr.WriteData(1, piece == "whole", []byte(piece)); err != nil {
				t.Fatal(err)
			}
		}
		if r := rc.response(1); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
		time.Sleep(2 * wait)
		rc.get(3, "/")
		if r := rc.response(3); r.status != 200 {
			t.Fatalf("the next request: status %d", r.status)
		}
	})
}
