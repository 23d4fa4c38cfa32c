package h2up

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestConnProperty runs random exchanges, the backend's frames (heads,
// DATA, trailers, resets, GOAWAY, WINDOW_UPDATE, SETTINGS, PING) mixed
// with streams opened, written, read and closed in random order, and
// checks after every step that the windows add up, and after each run
// that no stream place, window or goroutine is left.
func TestConnProperty(t *testing.T) {
	cases := 300
	if testing.Short() {
		cases = 50
	}
	base := runtime.NumGoroutine()
	for seed := range uint64(cases) {
		runProperty(t, seed)
		if t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
	}
	settle(t, base)
}

// FuzzConn is TestConnProperty's exchange, driven by a fuzzed seed.
func FuzzConn(f *testing.F) {
	for _, seed := range []uint64{1, 7, 42, 1000, 65535} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		base := runtime.NumGoroutine()
		runProperty(t, seed)
		settle(t, base)
	})
}

// settle waits, bounded, for the goroutines to return to base.
func settle(t testing.TB, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

// propFake is the backend of a property run: a goroutine reads relay's
// frames and notes the streams relay opened; the run writes the
// backend's frames.
type propFake struct {
	nc net.Conn
	bw *bufio.Writer
	fr *http2.Framer

	mu  sync.Mutex
	ids []uint32        // streams whose head relay sent
	rst map[uint32]bool // of those, the ones relay reset
	// What relay gave back, of each stream's window and the
	// connection's (0).
	credit map[uint32]int64
	data   int64 // DATA bytes relay sent
	acks   chan [8]byte
	gone   chan struct{} // closed at relay's GOAWAY
	done   chan struct{}
}

func (f *propFake) read() {
	defer close(f.done)
	rf := http2.NewFramer(nil, f.nc)
	rf.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	pre := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(f.nc, pre); err != nil {
		return
	}
	for {
		fr, err := rf.ReadFrame()
		if err != nil {
			return
		}
		f.mu.Lock()
		switch fr := fr.(type) {
		case *http2.MetaHeadersFrame:
			if n := len(f.ids); n == 0 || f.ids[n-1] < fr.StreamID {
				f.ids = append(f.ids, fr.StreamID)
			}
		case *http2.DataFrame:
			f.data += int64(fr.Length)
		case *http2.WindowUpdateFrame:
			f.credit[fr.StreamID] += int64(fr.Increment)
		case *http2.RSTStreamFrame:
			f.rst[fr.StreamID] = true
		case *http2.GoAwayFrame:
			select {
			case <-f.gone:
			default:
				close(f.gone)
			}
		case *http2.PingFrame:
			if fr.IsAck() {
				select {
				case f.acks <- fr.Data:
				default:
				}
			}
		}
		f.mu.Unlock()
	}
}

// actions are the steps of a property run, as many times each as it is
// to be likely: 0 Open, 1 WriteHead, 3 Write, 4 CloseWrite, 5 ReadHead or
// Read, 6 Close; the backend's 7 head, 8 trailers, 9 DATA, 11
// RST_STREAM, 12 GOAWAY, 13 WINDOW_UPDATE, 14 SETTINGS, 15 PING.
var actions = []int{0, 0, 0, 1, 1, 1, 1, 3, 3, 4, 5, 5, 5, 5, 5, 6, 6, 7, 7, 7, 7, 8, 9, 9, 9, 9, 11, 12, 13, 13, 14, 15}

func runProperty(t testing.TB, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err == nil {
			accepted <- nc
		}
		close(accepted)
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{StreamWindow: int32(1 + rng.IntN([]int{4000, 70000}[rng.IntN(2)])), MaxStreams: uint32(1 + rng.IntN(8)), WriteTimeout: 5 * time.Second}
	c, err := Start(nc, o)
	if err != nil {
		t.Fatal(err)
	}
	bnc := <-accepted
	f := &propFake{rst: map[uint32]bool{}, credit: map[uint32]int64{}, nc: bnc, acks: make(chan [8]byte, 64), gone: make(chan struct{}), done: make(chan struct{})}
	f.bw = bufio.NewWriter(bnc)
	f.fr = http2.NewFramer(f.bw, nil)
	go f.read()
	defer func() {
		bnc.Close()
		<-f.done
	}()
	send := func(fn func()) {
		bnc.SetWriteDeadline(time.Now().Add(5 * time.Second))
		fn()
		f.bw.Flush()
	}
	block := func(fields ...string) []byte {
		var b []byte
		e := hpack.NewEncoder(sliceWriter{&b})
		for i := 0; i+1 < len(fields); i += 2 {
			e.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		return b
	}
	send(func() { f.fr.WriteSettings() })
	pick := func() uint32 {
		f.mu.Lock()
		defer f.mu.Unlock()
		if rng.IntN(100) == 0 {
			return uint32(1 + 2*rng.IntN(20)) // perhaps never opened
		}
		if len(f.ids) == 0 {
			return 0 // no stream to send on yet
		}
		// Mostly streams relay has not reset.
		var live []uint32
		for _, id := range f.ids {
			if !f.rst[id] {
				live = append(live, id)
			}
		}
		if len(live) > 0 && rng.IntN(8) != 0 {
			return live[rng.IntN(len(live))]
		}
		return f.ids[rng.IntN(len(f.ids))]
	}

	var streams []*Stream
	var lastID uint32 // the stream the backend last sent a frame on
	headSent := map[uint32]bool{}
	dataSent := map[uint32]int64{} // DATA the backend sent, per stream and (0) in all
	buf := make([]byte, 20000)
	steps := 40 + rng.IntN(120)
	for step := range steps {
		a := actions[rng.IntN(len(actions))]
		id := pick()
		if a >= 7 && a <= 11 && id != 0 {
			lastID = id
		}
		if id == 0 && a >= 7 && a <= 11 {
			a = 15
		}
		switch {
		case a == 0:
			if s := c.Open(); s != nil {
				streams = append(streams, s)
			}
		case a <= 2 && len(streams) > 0:
			s := streams[rng.IntN(len(streams))]
			s.WriteHead(post("/"), rng.IntN(4) == 0)
		case a == 3 && len(streams) > 0:
			s := streams[rng.IntN(len(streams))]
			s.SetWriteDeadline(time.Now())
			s.Write(buf[:rng.IntN(len(buf))])
		case a == 4 && len(streams) > 0:
			s := streams[rng.IntN(len(streams))]
			var tr []hpack.HeaderField
			if rng.IntN(2) == 0 {
				tr = []hpack.HeaderField{{Name: "x-t", Value: "1"}}
			}
			s.CloseWrite(tr)
		case a == 5 && len(streams) > 0:
			// Mostly the stream the backend last sent on, so bodies
			// are read and their window given back.
			s := streams[rng.IntN(len(streams))]
			for _, o := range streams {
				if o.id == lastID && rng.IntN(4) != 0 {
					s = o
				}
			}
			s.SetReadDeadline(time.Now())
			for range 1 + rng.IntN(3) {
				if rng.IntN(3) == 0 {
					s.ReadHead()
				} else {
					s.Read(buf[:rng.IntN(len(buf))])
				}
			}
		case a == 6 && len(streams) > 0:
			i := rng.IntN(len(streams))
			// Recycled, the stream comes back from a later Open: its
			// old state must not carry over.
			if rng.IntN(2) == 0 {
				streams[i].Recycle()
			} else {
				streams[i].Close()
			}
			streams = append(streams[:i], streams[i+1:]...)
		case a == 7:
			status := []string{"200", "200", "200", "204", "103", "404", "200", "xx"}[rng.IntN(8)]
			end := rng.IntN(3) == 0
			headSent[id] = true
			send(func() {
				f.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block(":status", status, "x-a", "b"), EndStream: end, EndHeaders: true})
			})
		case a == 8:
			send(func() {
				f.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block("grpc-status", "0"), EndStream: true, EndHeaders: true})
			})
		case a <= 10:
			// Mostly small, so that streams live within their windows
			// and their readers give window back.
			n, end := rng.IntN(1500), rng.IntN(6) == 0
			if rng.IntN(4) == 0 {
				n = rng.IntN(16385)
			}
			n = min(n, len(buf))
			if !headSent[id] && rng.IntN(8) != 0 {
				headSent[id] = true
				send(func() {
					f.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block(":status", "200"), EndHeaders: true})
				})
			}
			if rng.IntN(8) != 0 {
				// Mostly within the windows relay gave.
				f.mu.Lock()
				n = int(min(int64(n), int64(o.StreamWindow)+f.credit[id]-dataSent[id], c.connWindow+f.credit[0]-dataSent[0]))
				f.mu.Unlock()
				if n < 0 {
					break
				}
			}
			var pad []byte
			if rng.IntN(4) == 0 && n > 60 {
				// Padding counts against the windows too.
				pad = make([]byte, rng.IntN(50))
				n -= len(pad) + 1
			}
			dataSent[id] += int64(n)
			dataSent[0] += int64(n)
			if pad != nil {
				dataSent[id] += int64(len(pad) + 1)
				dataSent[0] += int64(len(pad) + 1)
			}
			send(func() { f.fr.WriteDataPadded(id, end, buf[:n], pad) })
		case a == 11:
			code := http2.ErrCode(rng.IntN(14))
			send(func() { f.fr.WriteRSTStream(id, code) })
		case a == 12 && rng.IntN(4) == 0:
			send(func() { f.fr.WriteGoAway(id, http2.ErrCodeNo, nil) })
		case a == 13:
			inc := uint32(1 + rng.IntN(100000))
			if rng.IntN(2) == 0 {
				id = 0
			}
			if rng.IntN(30) == 0 {
				inc = maxWindow
			}
			send(func() { f.fr.WriteWindowUpdate(id, inc) })
		case a == 14:
			v := uint32(rng.IntN(200000))
			send(func() { f.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: v}) })
		case a == 15:
			send(func() { f.fr.WritePing(false, [8]byte{byte(step)}) })
		}
		if a >= 7 && rng.IntN(2) == 0 {
			// Wait for relay to have read the backend's frames: its
			// answer to a PING comes after them.
			mark := [8]byte{0xff, byte(step)}
			send(func() { f.fr.WritePing(false, mark) })
		wait:
			for {
				select {
				case d := <-f.acks:
					if d == mark {
						break wait
					}
				case <-c.Done():
					break wait
				case <-f.gone:
					break wait
				case <-time.After(5 * time.Second):
					t.Fatalf("seed %d step %d: no answer to a PING", seed, step)
				}
			}
		}
		if err := consistent(c); err != nil {
			t.Fatalf("seed %d step %d: %v", seed, step, err)
		}
	}
	for _, s := range streams {
		s.Close()
	}
	if n := c.Streams(); n != 0 {
		t.Fatalf("seed %d: %d streams after every one closed", seed, n)
	}
	c.Close()
	// The backend goes too, so a connection relay ended for its fault
	// need not linger for it.
	bnc.Close()
	<-f.done
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("seed %d: connection not done after Close", seed)
	}
	if err := consistent(c); err != nil {
		t.Fatalf("seed %d at the end: %v", seed, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open != 0 || len(c.streams) != 0 || len(c.waiters) != 0 {
		t.Fatalf("seed %d: %d places, %d streams, %d waiters left", seed, c.open, len(c.streams), len(c.waiters))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.data > c.dataOut {
		t.Fatalf("seed %d: the backend got %d DATA bytes, relay wrote %d", seed, f.data, c.dataOut)
	}
}

// consistent checks the connection's accounting of its windows.
func consistent(c *Conn) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recvWin+c.unacked != c.connWindow || c.recvWin < 0 {
		return fmt.Errorf("receive window %d + %d consumed, of %d", c.recvWin, c.unacked, c.connWindow)
	}
	// No writer is in the middle of a write: the test writes from one
	// goroutine.
	if c.sendWin != initialWindow+c.granted-c.dataOut {
		return fmt.Errorf("send window %d, granted %d, written %d", c.sendWin, c.granted, c.dataOut)
	}
	if c.open < len(c.streams) || c.open > int(c.o.MaxStreams) {
		return fmt.Errorf("%d places for %d streams", c.open, len(c.streams))
	}
	for id, s := range c.streams {
		if s.reset || s.remoteDone {
			continue
		}
		held := int64(len(s.buf) - s.off)
		if s.recvWin+s.unacked+held != int64(c.o.StreamWindow) || s.recvWin < 0 {
			return fmt.Errorf("stream %d: window %d + %d consumed + %d held, of %d", id, s.recvWin, s.unacked, held, c.o.StreamWindow)
		}
		if cap(s.buf) > int(c.o.StreamWindow) && cap(s.buf) > 4096 {
			return fmt.Errorf("stream %d: buffer of %d bytes, window %d", id, cap(s.buf), c.o.StreamWindow)
		}
	}
	return nil
}
