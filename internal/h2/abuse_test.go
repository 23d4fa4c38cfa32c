package h2

import (
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/core"
)

// Rapid Reset (CVE-2023-44487): a client that opens streams and cancels
// each at once has its connection closed with GOAWAY ENHANCE_YOUR_CALM,
// while a client making as many requests and waiting for the answers is
// served on one connection.
func TestRapidResetClosesTheConnection(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			<-r.Context().Done() // never answers before the cancel
			return
		}
		w.Write([]byte("ok"))
	})
	f := startFront(t, b)
	const streams = 2 * resetMinStreams

	t.Run("requests answered", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		id := uint32(1)
		for sent := 0; sent < streams; {
			var ids []uint32
			for range 50 {
				rc.get(id, "/")
				ids = append(ids, id)
				id += 2
				sent++
			}
			for id, r := range rc.responses(ids...) {
				if r.status != 200 {
					t.Fatalf("stream %d: status %d, reset %v (%v)", id, r.status, r.reset, r.code)
				}
			}
		}
	})

	t.Run("requests cancelled", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		var g *http2.GoAwayFrame
		done := make(chan struct{})
		go func() {
			// Reads as the streams go out, so neither side blocks.
			defer close(done)
			for {
				fr, err := rc.fr.ReadFrame()
				if err != nil {
					return
				}
				if ga, ok := fr.(*http2.GoAwayFrame); ok && g == nil {
					g = &http2.GoAwayFrame{LastStreamID: ga.LastStreamID, ErrCode: ga.ErrCode}
				}
			}
		}()
		id := uint32(1)
		for range streams {
			rc.hbuf.Reset()
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "relay.test"}, {":path", "/wait"}} {
				rc.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			if rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.hbuf.Bytes(), EndStream: true, EndHeaders: true}) != nil ||
				rc.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				break // closed
			}
			id += 2
		}
		await(t, done, "the end of the connection")
		if g == nil || g.ErrCode != http2.ErrCodeEnhanceYourCalm {
			t.Fatalf("GOAWAY %+v after %d streams opened and cancelled; want ENHANCE_YOUR_CALM", g, (id-1)/2)
		}
	})
}

// A GOAWAY relay sends as it closes a connection at once (the Rapid Reset
// rule's ENHANCE_YOUR_CALM) reaches the client, though other goroutines
// wait to write: goAway flushes it itself rather than leave the flush to
// the next writer in line, as unlockWrite does, which would come after
// the close. Here a write held at the client's socket makes the GOAWAY,
// and then another frame, wait for the write side.
func TestGoAwayGoesOutBeforeTheConnectionCloses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	gate := newGatedConn(server)
	defer gate.reopen()
	c := newConn(NewServer(core.New(core.Config{}), testBodyTime, testLimits(), nil), gate)
	defer c.nc.Close()
	ping := func(b byte) {
		c.lockWrite()
		c.wfr.WritePing(false, [8]byte{b})
		c.unlockWrite()
	}

	gate.shut()
	go ping('a')
	await(t, gate.blocked, "a write held at the client's socket")
	closed := make(chan struct{})
	go func() {
		c.goAway(http2.ErrCodeEnhanceYourCalm, false)
		close(closed)
	}()
	waitUntil(t, "the GOAWAY waiting for the write side", func() bool { return c.writers.Load() == 1 })
	go ping('b')
	waitUntil(t, "another frame waiting behind it", func() bool { return c.writers.Load() == 2 })
	gate.reopen()
	await(t, closed, "the connection closed")

	client.SetDeadline(time.Now().Add(ioTimeout))
	fr := http2.NewFramer(nil, client)
	var types []http2.FrameType
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("the connection ended (%v) after %v, with no GOAWAY", err, types)
		}
		types = append(types, f.Header().Type)
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeEnhanceYourCalm {
				t.Errorf("GOAWAY %v, want ENHANCE_YOUR_CALM", g.ErrCode)
			}
			return
		}
	}
}
