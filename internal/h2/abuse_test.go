package h2

import (
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/core"
	"relay/internal/logging"
	"relay/internal/testlog"
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

// Streams relay refuses itself count as wasted for the Rapid Reset rule,
// as cancelled ones do: a client that pads its cancelled streams with
// requests relay answers 400 or resets (PROTOCOL_ERROR) to keep the
// cancelled ones under half is cut off all the same, within the streams
// the rule allows, and logged once. A client with an occasional refusal
// or cancel is served on, and so is another client.
func TestRapidResetPaddedWithRefusedStreamsIsCutOff(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			<-r.Context().Done()
			return
		}
		w.Write([]byte("ok"))
	})
	log, logs := testlog.New()
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{log: log}, b)

	t.Run("padded", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		// Each round: a stream cancelled at once, one answered 400 (a
		// :path relay will not forward), one reset (a connection-
		// specific field).
		r := flood(t, rc, 3*2*resetMinStreams, func(i int) error {
			id := uint32(2*i + 1)
			switch i % 3 {
			case 0:
				rc.hbuf.Reset()
				for _, hf := range requestFields("GET", "/wait") {
					rc.enc.WriteField(hf)
				}
				if err := rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.hbuf.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
					return err
				}
				return rc.fr.WriteRSTStream(id, http2.ErrCodeCancel)
			case 1:
				return writeRequest(rc, id, request("GET", "bad-path"))
			default:
				return writeRequest(rc, id, request("GET", "/", "connection", "close"))
			}
		})
		r.cutOff(t, "cancelled streams padded with refused ones")
		if max := uint32(2*(2*resetMinStreams+runningPerStream*testLimits().MaxConcurrentStreams) + 1); r.goAway.LastStreamID > max {
			t.Errorf("relay took streams up to %d before it cut the client off; want at most %d", r.goAway.LastStreamID, max)
		}
		lines := warnings(t, logs, "Rapid Reset")
		if len(lines) != 1 {
			t.Fatalf("%d warnings for one connection, want 1: %v", len(lines), lines)
		}
		t.Logf("%d frames sent; GOAWAY after stream %d; logged %v", r.sent, r.goAway.LastStreamID, lines[0])
		servesAnother(t, f)
	})

	t.Run("occasional refusals", func(t *testing.T) {
		rc := dialRaw(t, f.addr)
		id := uint32(1)
		for sent := 0; sent < 2*resetMinStreams; sent += 10 {
			// Of each ten requests, one is answered 400 by relay and
			// one is cancelled before its answer.
			var ids []uint32
			for k := range 10 {
				switch k {
				case 0:
					rc.get(id, "bad-path")
				case 1:
					rc.get(id, "/wait")
					rc.fr.WriteRSTStream(id, http2.ErrCodeCancel)
					id += 2
					continue
				default:
					rc.get(id, "/")
				}
				ids = append(ids, id)
				id += 2
			}
			for id, r := range rc.responses(ids...) {
				if r.status == 0 {
					t.Fatalf("stream %d: reset %v (%v)", id, r.reset, r.code)
				}
			}
		}
	})
}

// writeRequest writes a request's header block on stream id, returning
// the error rather than failing the test: relay may have closed.
func writeRequest(rc *rawConn, id uint32, fields []string) error {
	rc.hbuf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		rc.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: rc.hbuf.Bytes(), EndStream: true, EndHeaders: true})
}

// One Rapid Reset connection is logged once, however many of its streams
// finish after the decision; and the lines of many such connections go
// through the server's rate limit (abuseLines a second; here, so that
// the count does not depend on the machine's pace, abuseLines an hour).
func TestRapidResetIsLoggedOncePerConnectionAndRateLimited(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			<-r.Context().Done()
			return
		}
		w.Write([]byte("ok"))
	})
	log, logs := testlog.New()
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{log: log}, b)
	rapidReset := func() floodResult {
		rc := dialRaw(t, f.addr)
		return flood(t, rc, 4*resetMinStreams, func(i int) error {
			id := uint32(2*i + 1)
			if err := writeRequest(rc, id, request("GET", "/wait")); err != nil {
				return err
			}
			return rc.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		})
	}

	r := rapidReset()
	r.closedOrCalmed(t, "Rapid Reset")
	if n := len(warnings(t, logs, "Rapid Reset")); n != 1 {
		t.Fatalf("%d warnings for one connection, want 1", n)
	}

	f.srv.abuseLog = logging.NewLimited(log, abuseLines, time.Hour)
	const conns = 2 * abuseLines
	start := time.Now()
	done := make(chan floodResult, conns)
	for range conns {
		go func() { done <- rapidReset() }()
	}
	for range conns {
		await(t, done, "a Rapid Reset connection's end").closedOrCalmed(t, "Rapid Reset")
	}
	took := time.Since(start)
	lines := warnings(t, logs, "Rapid Reset")[1:]
	t.Logf("%d connections cut off in %v: %d lines", conns, took, len(lines))
	if len(lines) != abuseLines {
		t.Errorf("%d lines for %d connections; want %d", len(lines), conns, abuseLines)
	}
	servesAnother(t, f)
}
