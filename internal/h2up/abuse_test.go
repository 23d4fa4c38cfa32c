package h2up

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// A backend flooding PING or SETTINGS is cut off with ENHANCE_YOUR_CALM.
func TestControlFlood(t *testing.T) {
	for _, kind := range []string{"PING", "SETTINGS"} {
		t.Run(kind, func(t *testing.T) {
			c, f := fakeBackend(t, Options{})
			go f.write(func() {
				for i := range 3 * controlBudget {
					if kind == "PING" {
						f.fr.WritePing(false, [8]byte{byte(i)})
					} else {
						f.fr.WriteSettings()
					}
				}
			})
			if code, ok := f.goAway(); !ok || code != http2.ErrCodeEnhanceYourCalm {
				t.Fatalf("GOAWAY %v %v, want ENHANCE_YOUR_CALM", code, ok)
			}
			<-c.Done()
		})
	}
}

// Frames relay's requests pay for are no flood: a backend answering many
// requests, with a WINDOW_UPDATE and a PING per request, keeps its
// connection.
func TestControlPaidFor(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	for i := range 3 * controlBudget {
		s := c.Open()
		if err := s.WriteHead(post("/"), false); err != nil {
			t.Fatal(err)
		}
		s.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := s.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		s.CloseWrite(nil)
		var id uint32
		for id == 0 {
			if d, ok := f.next().(*http2.DataFrame); ok && d.StreamEnded() {
				id = d.StreamID
			}
		}
		f.write(func() {
			f.fr.WriteWindowUpdate(0, 1)
			f.fr.WritePing(false, [8]byte{byte(i)})
		})
		f.head(id, true, ":status", "200")
		s.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := s.ReadHead(); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		s.Close()
	}
	if !c.Usable() {
		t.Fatal("connection cut off")
	}
}

// An endless header block, of empty CONTINUATION frames, ends the
// connection once it passes twice the header limit.
func TestContinuationFlood(t *testing.T) {
	c, f := fakeBackend(t, Options{MaxHeaderBytes: 4096})
	s := c.Open()
	defer s.Close()
	s.WriteHead(get("/"), true)
	f.until("HEADERS", isHeaders)
	go f.write(func() {
		f.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0x88}, EndHeaders: false})
		for range 100000 {
			if f.fr.WriteContinuation(1, false, nil) != nil {
				return
			}
		}
	})
	if code, ok := f.goAway(); !ok || code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("GOAWAY %v %v, want ENHANCE_YOUR_CALM", code, ok)
	}
	<-c.Done()
}

// A response head over MaxHeaderBytes fails its stream, and is not held.
func TestHeadOverLimit(t *testing.T) {
	c, f := fakeBackend(t, Options{MaxHeaderBytes: 4096})
	s := c.Open()
	defer s.Close()
	s.WriteHead(get("/"), true)
	f.until("HEADERS", isHeaders)
	// Fields each under the limit, together over it.
	f.head(1, false, ":status", "200", "x-a", strings.Repeat("a", 1500), "x-b", strings.Repeat("b", 1500), "x-c", strings.Repeat("c", 1500))
	rst := f.until("RST_STREAM", isRST).(*http2.RSTStreamFrame)
	if rst.StreamID != 1 {
		t.Fatalf("reset of %d", rst.StreamID)
	}
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	if h, err := s.ReadHead(); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("ReadHead: %+v %v", h, err)
	}
	// Far over it, the connection ends.
	c2, f2 := fakeBackend(t, Options{MaxHeaderBytes: 4096})
	s2 := c2.Open()
	defer s2.Close()
	s2.WriteHead(get("/"), true)
	f2.until("HEADERS", isHeaders)
	f2.head(1, false, ":status", "200", "x-big", strings.Repeat("v", 12000))
	if _, ok := f2.goAway(); !ok {
		t.Fatal("no GOAWAY for a head three times the limit")
	}
	<-c2.Done()
}

// DATA for a stream relay closed is counted against the connection's
// window, given back, and not held; DATA for a stream relay never opened
// ends the connection.
func TestDataOnClosedStream(t *testing.T) {
	// A connection window of 64 KiB, which the DATA below passes five
	// times over: the backend sends only what relay gives back.
	c, f := fakeBackend(t, Options{StreamWindow: 16384, MaxStreams: 4})
	ss := openHeaded(t, c, f, 1)
	ss[0].Close()
	f.until("RST_STREAM", isRST)
	const frames = 20
	avail := int64(initialWindow)
	for range frames {
		for avail < 16384 {
			if w, ok := f.next().(*http2.WindowUpdateFrame); ok && w.StreamID == 0 {
				avail += int64(w.Increment)
			}
		}
		f.write(func() { f.fr.WriteData(1, false, make([]byte, 16384)) })
		avail -= 16384
	}
	// The PING's answer comes after relay has read all the DATA.
	f.write(func() { f.fr.WritePing(false, [8]byte{9}) })
	f.until("PING ACK", func(fr http2.Frame) bool { p, ok := fr.(*http2.PingFrame); return ok && p.IsAck() })
	c.mu.Lock()
	rw, un := c.recvWin, c.unacked
	c.mu.Unlock()
	if rw+un != c.connWindow || un >= c.connUpdateAt {
		t.Fatalf("connection window %d, %d consumed and not given back, of %d", rw, un, c.connWindow)
	}
	if !c.Usable() {
		t.Fatal("connection lost")
	}
	// A stream relay never opened.
	f.write(func() { f.fr.WriteData(7, false, []byte("x")) })
	if code, ok := f.goAway(); !ok || code != http2.ErrCodeProtocol {
		t.Fatalf("GOAWAY %v %v, want PROTOCOL_ERROR", code, ok)
	}
}

// relay turned push off: a PUSH_PROMISE is a protocol error.
func TestPushPromise(t *testing.T) {
	c, f := fakeBackend(t, Options{})
	openHeaded(t, c, f, 1)
	f.write(func() {
		f.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: []byte{0x82}, EndHeaders: true})
	})
	if code, ok := f.goAway(); !ok || code != http2.ErrCodeProtocol {
		t.Fatalf("GOAWAY %v %v, want PROTOCOL_ERROR", code, ok)
	}
	<-c.Done()
}

// A backend that stops reading costs its connection after WriteTimeout,
// and the streams of other connections go on meanwhile.
func TestBackendStopsReading(t *testing.T) {
	c, f := fakeBackend(t, Options{WriteTimeout: 300 * time.Millisecond},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow})
	f.write(func() { f.fr.WriteWindowUpdate(0, maxWindow-initialWindow) })
	s := c.Open()
	defer s.Close()
	s.WriteHead(post("/"), false)
	waitFor(t, "the connection's window", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.sendWin == maxWindow
	})
	// The fake reads nothing more: relay's writes fill the socket.
	other := h2cServer(t, &http2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	oc := dial(t, other, Options{})
	failed := make(chan error, 1)
	go func() {
		chunk := make([]byte, 1<<20)
		s.SetWriteDeadline(time.Now().Add(time.Minute))
		for range 1000 {
			if _, err := s.Write(chunk); err != nil {
				failed <- err
				return
			}
		}
		failed <- nil
	}()
	// Meanwhile, another connection serves.
	for range 5 {
		os := oc.Open()
		os.WriteHead(get("/"), true)
		os.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := os.ReadHead(); err != nil {
			t.Fatal(err)
		}
		if b, err := readAll(t, os); !bytes.Equal(b, []byte("ok")) || err != nil {
			t.Fatal(string(b), err)
		}
		os.Close()
	}
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("1000 MiB written to a backend that reads nothing")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Write still blocked on a backend that reads nothing")
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection open after its write timed out")
	}
}
