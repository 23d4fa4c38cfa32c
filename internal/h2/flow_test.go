package h2

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
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

// Connection window relay took for a stream's DATA and did not use,
// because the client reset the stream before the frame went out, is
// given back: the client never gets those bytes, so it never grants them
// again. Here streams waiting to write behind a write held at the
// client's socket take every byte of the client's 65535-byte connection
// window, and the client resets them all. Once the socket drains, a
// download larger than that window must still arrive whole on a new
// stream, the client granting back exactly what it received.
func TestSendWindowOfResetStreamsIsGivenBack(t *testing.T) {
	const (
		size    = 256 << 10 // each response: far more than the window
		streams = 16        // more than the window has room for
		connWin = 65535     // the client's connection window: the default, only given back
	)
	body := pattern(size)
	arrived := make(chan string, streams+1)
	release := map[string]chan struct{}{"/empty": make(chan struct{}), "/big": make(chan struct{})}
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/download" {
			w.Header().Set("Content-Length", strconv.Itoa(size))
			w.Write(body)
			return
		}
		arrived <- r.URL.Path
		select {
		case <-release[r.URL.Path]:
		case <-r.Context().Done():
			return
		}
		if r.URL.Path == "/empty" {
			w.Header().Set("Content-Length", "0")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(body)
	})
	gates := make(chan *gatedConn, 1)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{wrap: func(nc net.Conn) net.Conn {
		g := newGatedConn(nc)
		gates <- g
		return g
	}}, b)
	// Stream windows as large as can be: only the connection's counts.
	rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow})
	rc.autoWindow = false
	gate := await(t, gates, "relay's connection")
	t.Cleanup(gate.reopen)
	rc.sync() // relay has nothing more to write
	cn := serverConn(t, f)

	rc.get(1, "/empty")
	var big []uint32
	for i := range streams {
		id := uint32(3 + 2*i)
		big = append(big, id)
		rc.get(id, "/big")
	}
	for range streams + 1 {
		await(t, arrived, "the requests at the backend")
	}

	// The big responses start: every head goes out, and DATA until the
	// connection window is used up.
	close(release["/big"])
	heads, got := 0, 0
	for heads < streams || got < connWin {
		switch fr := rc.next().(type) {
		case *http2.MetaHeadersFrame:
			heads++
		case *http2.DataFrame:
			got += int(fr.Length)
		case *http2.RSTStreamFrame:
			t.Fatalf("stream %d reset (%v)", fr.StreamID, fr.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY (%v)", fr.ErrCode)
		}
	}
	if got != connWin {
		t.Fatalf("%d bytes of DATA in a connection window of %d", got, connWin)
	}

	// The client's socket takes nothing more: stream 1's head, the next
	// write, waits at it with the write side held.
	gate.shut()
	close(release["/empty"])
	await(t, gate.blocked, "a write held at the client's socket")

	// The client grants back what it received; streams waiting for
	// window take all of it, and wait for the write side.
	if err := rc.fr.WriteWindowUpdate(0, connWin); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the connection window taken by streams waiting to write", func() bool {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		var taken int64 // by the streams, of their own windows: sent, or about to be
		for _, st := range cn.streams {
			taken += cn.peerWin - st.sendWin
		}
		return cn.sendWin == 0 && taken == 2*connWin
	})
	for _, id := range big {
		if err := rc.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the resets taken", func() bool {
		cn.mu.Lock()
		defer cn.mu.Unlock()
		for _, id := range big {
			if cn.streams[id] != nil {
				return false
			}
		}
		return true
	})
	gate.reopen()

	// Stream 1 ends; whatever DATA arrives meanwhile is granted back.
	for ended := false; !ended; {
		switch fr := rc.next().(type) {
		case *http2.MetaHeadersFrame:
			if fr.StreamID == 1 {
				if s := fr.PseudoValue("status"); s != "200" {
					t.Fatalf("stream 1: status %s", s)
				}
				ended = fr.StreamEnded()
			}
		case *http2.DataFrame:
			if fr.Length > 0 {
				rc.fr.WriteWindowUpdate(0, fr.Length)
			}
			ended = fr.StreamID == 1 && fr.StreamEnded()
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY (%v)", fr.ErrCode)
		}
	}

	// A new download, granted back frame by frame.
	rc.autoWindow = true
	id := uint32(3 + 2*streams)
	rc.get(id, "/download")
	rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var down []byte
	for ended := false; !ended; {
		fr, err := rc.read()
		if err != nil {
			cn.mu.Lock()
			win := cn.sendWin
			cn.mu.Unlock()
			t.Fatalf("the download stalled after %d of %d bytes, relay's connection window at %d: %v", len(down), size, win, err)
		}
		switch fr := fr.(type) {
		case *http2.DataFrame:
			if fr.StreamID == id {
				down = append(down, fr.Data()...)
				ended = fr.StreamEnded()
			}
		case *http2.RSTStreamFrame:
			if fr.StreamID == id {
				t.Fatalf("the download was reset (%v) after %d bytes", fr.ErrCode, len(down))
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY (%v) after %d bytes", fr.ErrCode, len(down))
		}
	}
	if !bytes.Equal(down, body) {
		t.Fatalf("downloaded %d bytes, not the backend's %d", len(down), size)
	}
}

// Padding is never read, so relay gives its window back as its DATA
// frame arrives. A client whose frames are mostly padding (one byte of
// data, 255 of padding) keeps sending, well past the stream's window,
// while its request waits unread in relay's queue for a busy backend.
func TestPaddingWindowComesBackAtOnce(t *testing.T) {
	const (
		frames = 8192            // about twice the stream window relay grants
		length = 1 + 1 + 255     // each frame's flow-controlled length: pad length, data, padding
		stall  = 3 * time.Second // a wait for window that means none is coming
	)
	data := pattern(frames)
	arrived := make(chan string, 2)
	release := make(chan struct{})
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.URL.Path
		if r.URL.Path == "/hold" {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			io.WriteString(w, "held")
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		io.WriteString(w, digest(body))
	})
	// One request at a time: the upload waits in relay's queue while the
	// first one holds the backend.
	b.SetMaxRequests(1)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) {
		pc.MaxQueued, pc.QueueTimeout = 10, ioTimeout
	}}, b)
	rc := dialRaw(t, f.addr)
	if _, ok := rc.next().(*http2.SettingsFrame); !ok {
		t.Fatal("relay's first frame is not SETTINGS")
	}
	sw, cw := int64(rc.settings[http2.SettingInitialWindowSize]), int64(65535)
	if sw == 0 {
		sw = 65535
	}
	rc.get(1, "/hold")
	if p := await(t, arrived, "the first request"); p != "/hold" {
		t.Fatalf("the backend got %s first", p)
	}

	rc.writeHeaders(3, false, request("POST", "/upload")...)
	pad := make([]byte, 255)
	var granted int64 // stream window given back while the upload waited
	for i := 0; i < frames; {
		if sw >= length && cw >= length {
			if err := rc.fr.WriteDataPadded(3, i == frames-1, data[i:i+1], pad); err != nil {
				t.Fatal(err)
			}
			sw -= length
			cw -= length
			i++
			continue
		}
		rc.nc.SetReadDeadline(time.Now().Add(stall))
		fr, err := rc.read()
		if err != nil {
			t.Fatalf("no window after %d of %d frames (%d bytes of stream window used, %d given back; the backend has read nothing): %v",
				i, frames, int64(i)*length, granted, err)
		}
		switch fr := fr.(type) {
		case *http2.WindowUpdateFrame:
			switch fr.StreamID {
			case 0:
				cw += int64(fr.Increment)
			case 3:
				sw += int64(fr.Increment)
				granted += int64(fr.Increment)
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream %d reset (%v) after %d frames", fr.StreamID, fr.ErrCode, i)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY (%v) after %d frames", fr.ErrCode, i)
		}
	}
	rc.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	select {
	case p := <-arrived:
		t.Fatalf("%s reached the backend while it was busy", p)
	default:
	}
	t.Logf("%d frames sent; %d bytes of stream window given back meanwhile", frames, granted)

	close(release)
	for id, r := range rc.responses(1, 3) {
		want := "held"
		if id == 3 {
			want = digest(data)
		}
		if r.status != 200 || string(r.body) != want {
			t.Errorf("stream %d: status %d, body %q; want 200 %q", id, r.status, r.body, want)
		}
	}
}

// patternReader reads pattern bytes without end, for a large body that
// the client does not hold in memory.
type patternReader struct{ off int }

var patternBlock = pattern(64 << 10)

func (r *patternReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k := copy(p[n:], patternBlock[r.off:])
		n += k
		r.off = (r.off + k) % len(patternBlock)
	}
	return n, nil
}

// smallBufferListener gives the connections it accepts a receive buffer
// of 64 KiB, which the kernel does not grow.
type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetReadBuffer(64 << 10)
	}
	return nc, err
}

// A request body that the backend takes a little more slowly than the
// client sends it is held in a buffer of about the stream's window: the
// bytes already read make room before the buffer grows. Over a 64 MiB
// upload relay's heap grows by far less than the body.
func TestSlowlyTakenUploadKeepsTheHeapBounded(t *testing.T) {
	const (
		size  = 64 << 20
		bound = 32 << 20 // heap growth allowed: the body's buffer must not be behind it
	)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 32<<10)
		var n int64
		for {
			k, err := r.Body.Read(buf)
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			time.Sleep(100 * time.Microsecond) // a little slower than the client
		}
		io.WriteString(w, strconv.FormatInt(n, 10))
	}))
	// Small socket buffers both ends, so that the backend's pace is
	// relay's pace at once rather than after tens of MiB.
	s.Listener = smallBufferListener{s.Listener}
	s.Start()
	t.Cleanup(s.Close)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) {
		pc.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			nc, err := d.DialContext(ctx, network, addr)
			if tc, ok := nc.(*net.TCPConn); ok {
				tc.SetWriteBuffer(64 << 10)
			}
			return nc, err
		}
	}}, backendAt(t, s.URL))

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapInuse, ms.HeapInuse
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
		}
	}()
	req, err := http.NewRequest("POST", f.url+"/up", io.LimitReader(&patternReader{}, size))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	cl := h2Client(t)
	cl.Timeout = 3 * ioTimeout
	start := time.Now()
	resp, err := cl.Do(req)
	if err != nil {
		close(stop)
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	close(stop)
	<-sampled
	if resp.StatusCode != 200 || string(got) != strconv.Itoa(size) {
		t.Fatalf("status %d, body %.60q; want 200 and %d", resp.StatusCode, got, size)
	}
	growth := int64(peak) - int64(base)
	t.Logf("%d MiB in %v; heap in use grew by %.1f MiB at most", size>>20, time.Since(start).Round(time.Millisecond), float64(growth)/(1<<20))
	if growth > bound {
		t.Errorf("relay's heap grew by %d MiB over the upload, want under %d MiB", growth>>20, bound>>20)
	}
}

// The same, closer in: a body read a little behind its arrival, one byte
// always left unread, keeps a buffer of about a window however much goes
// through it.
func TestBodyBufferReusesTheBytesRead(t *testing.T) {
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
	defer server.Close()
	drained := make(chan struct{})
	go func() {
		// The WINDOW_UPDATEs relay sends as the body is read.
		defer close(drained)
		io.Copy(io.Discard, client)
	}()
	defer func() { server.Close(); <-drained }()

	c := newConn(NewServer(core.New(core.Config{}), testBodyTime, testLimits(), nil), server)
	st := streams.Get().(*stream)
	st.open(c, 1)
	defer st.release()
	b := &st.body
	chunk := pattern(16 << 10)
	p := make([]byte, len(chunk))
	add := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		b.add(chunk)
		return cap(b.buf)
	}
	read := func(p []byte) {
		t.Helper()
		if n, err := b.Read(p); n != len(p) || err != nil {
			t.Fatalf("read %d of %d bytes: %v", n, len(p), err)
		}
	}
	add()
	read(p[:len(chunk)-1])
	most := 0
	for through := len(chunk); through < 64<<20; through += len(chunk) {
		most = max(most, add())
		read(p)
	}
	if most > 2*streamWindow {
		t.Errorf("the body's buffer grew to %d bytes with %d unread; want at most two windows (%d)", most, len(chunk)+1, 2*streamWindow)
	}
}
