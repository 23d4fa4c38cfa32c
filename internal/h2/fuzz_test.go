package h2

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// FuzzConn writes what a client may send, decoded from the fuzz input
// into frames, to relay's HTTP/2 server over a loopback socket, with a
// real backend behind it. After each input:
//   - nothing panicked (a panic fails the run);
//   - relay answered a PING sent after the input, or ended the
//     connection, within fuzzWait;
//   - once the client closes, the connection ends within fuzzWait, and
//     the goroutines and file descriptors of the process, upstream
//     connections included, come back to what they were before;
//   - the heap stays within fuzzHeap.
//
// Without -fuzz it runs the seeds below as an ordinary test.
func FuzzConn(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	b := newBackend(f, "fuzz", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, io.LimitReader(r.Body, 4<<20))
		w.Header().Set("X-Path", r.URL.Path)
		io.WriteString(w, "fuzzed")
	})
	lim := Limits{MaxConcurrentStreams: 16, MaxHeaderBytes: 4096, IdleTimeout: time.Minute, HeaderTimeout: fuzzWait}
	front := startFrontOpts(f, testBodyTime, lim, frontOptions{}, b)

	goroutines, fds := -1, -1
	f.Fuzz(func(t *testing.T, in []byte) {
		if goroutines < 0 {
			// The baseline, counted where each input runs, once one
			// request went through: what the first one starts for good
			// is in it.
			fuzzOne(t, front, fuzzSeeds()[0])
			settle(t, front, -1, -1)
			goroutines, fds = runtime.NumGoroutine(), openFiles(t)
		}
		fuzzOne(t, front, in)
		settle(t, front, goroutines, fds)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > fuzzHeap {
			t.Fatalf("heap in use %d MiB after the input, more than %d", ms.HeapInuse>>20, fuzzHeap>>20)
		}
	})
}

const (
	// fuzzWait bounds each wait of an input: relay's answer to the PING
	// after it, the end of the connection.
	fuzzWait = 5 * time.Second
	// fuzzHeap bounds the heap in use after an input.
	fuzzHeap = 256 << 20
	// fuzzOps bounds the operations of one input.
	fuzzOps = 256
)

// fuzzOne writes the frames in decodes to, then a PING, and waits for the
// PING's answer or the end of the connection; then it closes the
// connection.
func fuzzOne(t testing.TB, front *front, in []byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", front.addr, fuzzWait)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * fuzzWait))
	// The reader takes whatever relay sends, so that relay never waits
	// on the client; it answers nothing.
	pong := [8]byte{'f', 'u', 'z', 'z'}
	done := make(chan error, 1)
	go func() {
		fr := http2.NewFramer(nil, nc)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		fr.MaxHeaderListSize = 1 << 20
		for {
			f, err := fr.ReadFrame()
			var se http2.StreamError
			switch {
			case errors.As(err, &se):
				continue // a header block relay wrote is fine; this decoder's view of it is not the point
			case err != nil:
				done <- err
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && p.IsAck() && p.Data == pong {
				done <- nil
				return
			}
			if g, ok := f.(*http2.GoAwayFrame); ok && g.ErrCode != http2.ErrCodeNo {
				done <- nil // relay ends the connection
				return
			}
		}
	}()
	w := &fuzzWriter{in: in, nc: nc, nextID: 1}
	w.fr = http2.NewFramer(nc, nil)
	w.fr.AllowIllegalWrites = true // zero increments, stream 0, whatever the input says
	w.enc = hpack.NewEncoder(&w.hbuf)
	if _, err := io.WriteString(nc, http2.ClientPreface); err == nil && w.fr.WriteSettings() == nil {
		w.run()
		w.fr.WritePing(false, pong)
		// Zeros: they complete a frame raw bytes left unfinished, which
		// relay would rightly wait for, and then are frames relay
		// refuses, so it answers the PING or ends the connection.
		nc.Write(make([]byte, maxFrameRead+2*9))
	}
	select {
	case err := <-done:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("relay neither answered a PING nor ended the connection within %v of the input", 2*fuzzWait)
		}
	case <-time.After(2 * fuzzWait):
		t.Fatalf("relay neither answered a PING nor ended the connection within %v of the input", 2*fuzzWait)
	}
}

// settle waits until relay serves no connection and, after its idle
// upstream connections are closed, until the process's goroutines and
// open files are no more than goroutines and fds (when not negative).
func settle(t testing.TB, front *front, goroutines, fds int) {
	t.Helper()
	deadline := time.Now().Add(fuzzWait)
	for {
		front.srv.mu.Lock()
		n := len(front.srv.conns)
		front.srv.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("relay still serves %d connections %v after the client closed", n, fuzzWait)
		}
		time.Sleep(time.Millisecond)
	}
	front.core.CloseIdle()
	if goroutines < 0 {
		// The baseline: wait for the backend's side of the closed
		// upstream connections to end.
		for i := 0; i < 1000; i++ {
			g, f := runtime.NumGoroutine(), openFiles(t)
			time.Sleep(5 * time.Millisecond)
			if runtime.NumGoroutine() == g && openFiles(t) == f {
				return
			}
		}
		return
	}
	for {
		g, f := runtime.NumGoroutine(), openFiles(t)
		if g <= goroutines && f <= fds {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines and %d open files %v after the connection ended, want at most %d and %d:\n%s",
				g, f, fuzzWait, goroutines, fds, buf)
		}
		time.Sleep(time.Millisecond)
	}
}

// openFiles counts the process's open file descriptors.
func openFiles(t testing.TB) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// The operations of a fuzz input, each a byte (taken modulo opCount)
// followed by its arguments; an input that runs out reads zeros.
const (
	opSettings     = iota // count, then (id, value) pairs
	opSettingsAck         //
	opHeaders             // stream, flags, fields
	opContinuation        // stream, flags, fields
	opData                // stream, flags, length (2 bytes), pad
	opWindowUpdate        // stream, increment (4 bytes)
	opRSTStream           // stream, code
	opPing                // flags, 8 bytes
	opPriority            // stream, dependency, weight, flags
	opGoAway              // stream, code
	opRaw                 // length, bytes: written as they are
	opGet                 // a well-formed GET on the next stream
	opPost                // flags, length (2 bytes): a well-formed POST with a body, maybe trailers
	opTableSize           // size (2 bytes): the encoder's dynamic table size
	opFlood               // kind, count (2 bytes): many frames of one kind
	opCount
)

// fuzzWriter turns a fuzz input into frames on a connection.
type fuzzWriter struct {
	in     []byte
	nc     net.Conn
	fr     *http2.Framer
	enc    *hpack.Encoder
	hbuf   bytes.Buffer
	nextID uint32
}

func (w *fuzzWriter) byte() byte {
	if len(w.in) == 0 {
		return 0
	}
	b := w.in[0]
	w.in = w.in[1:]
	return b
}

func (w *fuzzWriter) u16() int { return int(w.byte())<<8 | int(w.byte()) }

func (w *fuzzWriter) u32() uint32 { return uint32(w.u16())<<16 | uint32(w.u16()) }

func (w *fuzzWriter) bytes(n int) []byte {
	n = min(n, len(w.in))
	b := w.in[:n]
	w.in = w.in[n:]
	return b
}

// stream picks a stream ID: mostly the client's recent ones, sometimes
// one the client may not use.
func (w *fuzzWriter) stream() uint32 {
	b := w.byte()
	switch {
	case b < 200:
		id := w.nextID - 2*uint32(b%8)
		if int32(id) < 1 {
			id = 1 + 2*uint32(b%8)
		}
		return id
	case b < 220:
		return 0
	case b < 240:
		return uint32(b) * 2 // even: the server's
	}
	return w.nextID + 2*uint32(b%16) // ahead of what the client opened
}

// fuzzNames are the field names a fuzz input picks from: pseudo-fields,
// ordinary and connection-specific fields, and malformed ones.
var fuzzNames = []string{
	":method", ":scheme", ":authority", ":path", ":status", ":protocol",
	"host", "content-length", "cookie", "te", "expect", "user-agent", "x-a",
	"connection", "transfer-encoding", "upgrade", "keep-alive",
	"X-Upper", "bad name", "", ":", "x-\x00",
}

// fuzzValues are the field values a fuzz input picks from.
var fuzzValues = []string{
	"GET", "POST", "HEAD", "CONNECT", "OPTIONS", "http", "https", "relay.test", "/", "*", "/a?b",
	"0", "5", "-1", "18446744073709551616", "trailers", "100-continue", "a=1", "",
	" padded", "padded\t", "a\r\nb", "\x00", "relay.test evil", strings.Repeat("v", 4000),
}

// fields encodes the header fields the input describes into a block.
func (w *fuzzWriter) fields(wellFormed bool) []byte {
	w.hbuf.Reset()
	if wellFormed {
		fs := request("GET", "/")
		for i := 0; i < len(fs); i += 2 {
			w.enc.WriteField(hpack.HeaderField{Name: fs[i], Value: fs[i+1]})
		}
	}
	for n := w.byte() % 8; n > 0; n-- {
		b := w.byte()
		var hf hpack.HeaderField
		if b&1 == 0 {
			hf.Name = fuzzNames[int(b>>1)%len(fuzzNames)]
		} else {
			hf.Name = string(w.bytes(int(b>>1) % 16))
		}
		b = w.byte()
		switch {
		case b&3 == 3:
			hf.Value = strings.Repeat("r", w.u16()%20000)
		case b&1 == 0:
			hf.Value = fuzzValues[int(b>>1)%len(fuzzValues)]
		default:
			hf.Value = string(w.bytes(int(b>>2) % 64))
		}
		hf.Sensitive = b&4 != 0 && b&3 == 0
		w.enc.WriteField(hf)
	}
	return w.hbuf.Bytes()
}

// headers writes a header block on id, in HEADERS and CONTINUATION frames
// of at most 16 KiB.
func (w *fuzzWriter) headers(id uint32, block []byte, end bool, prio *http2.PriorityParam, pad byte) error {
	frag := block[:min(len(block), 16000)]
	block = block[len(frag):]
	p := http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0, PadLength: pad}
	if prio != nil {
		p.Priority = *prio
	}
	err := w.fr.WriteHeaders(p)
	for err == nil && len(block) > 0 {
		frag = block[:min(len(block), 16000)]
		block = block[len(frag):]
		err = w.fr.WriteContinuation(id, len(block) == 0, frag)
	}
	return err
}

// run writes the input's operations; it stops at the first write that
// fails, as relay may close the connection at any point.
func (w *fuzzWriter) run() {
	var err error
	for ops := 0; len(w.in) > 0 && ops < fuzzOps && err == nil; ops++ {
		switch w.byte() % opCount {
		case opSettings:
			var ss []http2.Setting
			for n := w.byte() % 4; n > 0; n-- {
				ss = append(ss, http2.Setting{ID: http2.SettingID(w.byte() % 8), Val: w.u32()})
			}
			err = w.fr.WriteSettings(ss...)
		case opSettingsAck:
			err = w.fr.WriteSettingsAck()
		case opHeaders, opContinuation:
			id, flags := w.stream(), w.byte()
			if id >= w.nextID && id%2 == 1 {
				w.nextID = id + 2
			}
			block := w.fields(flags&16 != 0)
			if flags&32 != 0 {
				// A CONTINUATION frame on its own, out of place or
				// after a HEADERS left open.
				err = w.fr.WriteContinuation(id, flags&2 == 0, block)
				break
			}
			var prio *http2.PriorityParam
			if flags&4 != 0 {
				prio = &http2.PriorityParam{StreamDep: w.stream(), Exclusive: flags&64 != 0, Weight: w.byte()}
			}
			pad := byte(0)
			if flags&8 != 0 {
				pad = w.byte()
			}
			if flags&2 != 0 {
				// Leave the block open: a CONTINUATION may follow.
				err = w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: flags&1 != 0, PadLength: pad})
				break
			}
			err = w.headers(id, block, flags&1 != 0, prio, pad)
		case opData:
			id, flags, n := w.stream(), w.byte(), w.u16()%20000
			data := make([]byte, n)
			copy(data, w.bytes(n))
			if flags&2 != 0 {
				err = w.fr.WriteDataPadded(id, flags&1 != 0, data, make([]byte, w.byte()))
			} else {
				err = w.fr.WriteData(id, flags&1 != 0, data)
			}
		case opWindowUpdate:
			err = w.fr.WriteWindowUpdate(w.stream(), w.u32()&(1<<31-1))
		case opRSTStream:
			err = w.fr.WriteRSTStream(w.stream(), http2.ErrCode(w.byte()%16))
		case opPing:
			flags := w.byte()
			var data [8]byte
			copy(data[:], w.bytes(8))
			err = w.fr.WritePing(flags&1 != 0, data)
		case opPriority:
			id, dep, weight, flags := w.stream(), w.stream(), w.byte(), w.byte()
			err = w.fr.WritePriority(id, http2.PriorityParam{StreamDep: dep, Weight: weight, Exclusive: flags&1 != 0})
		case opGoAway:
			err = w.fr.WriteGoAway(w.stream(), http2.ErrCode(w.byte()%16), nil)
		case opRaw:
			_, err = w.nc.Write(w.bytes(int(w.byte()) % 64))
		case opGet:
			err = w.headers(w.open(), w.fields(true), true, nil, 0)
		case opPost:
			flags, n := w.byte(), w.u16()%20000
			id := w.open()
			w.hbuf.Reset()
			fs := request("POST", "/post")
			if flags&1 != 0 {
				fs = append(fs, "content-length", strings.Repeat("9", int(flags>>6))+"0")
			}
			for i := 0; i < len(fs); i += 2 {
				w.enc.WriteField(hpack.HeaderField{Name: fs[i], Value: fs[i+1]})
			}
			if err = w.headers(id, w.hbuf.Bytes(), false, nil, 0); err == nil {
				err = w.fr.WriteData(id, flags&2 == 0, make([]byte, n))
			}
			if err == nil && flags&2 != 0 {
				err = w.headers(id, w.fields(false), true, nil, 0) // trailers
			}
		case opTableSize:
			w.enc.SetMaxDynamicTableSizeLimit(uint32(w.u16()))
			w.enc.SetMaxDynamicTableSize(uint32(w.u16()))
		case opFlood:
			kind, n := w.byte()%4, w.u16()%2000
			for i := 0; i < n && err == nil; i++ {
				switch kind {
				case 0:
					err = w.fr.WritePing(false, [8]byte{byte(i)})
				case 1:
					err = w.fr.WriteSettings()
				case 2:
					// Rapid Reset: open a stream and cancel it.
					id := w.open()
					if err = w.headers(id, w.fields(true), true, nil, 0); err == nil {
						err = w.fr.WriteRSTStream(id, http2.ErrCodeCancel)
					}
				case 3:
					err = w.fr.WriteData(w.nextID-2, false, nil)
				}
			}
		}
	}
}

// open returns the next new stream's ID.
func (w *fuzzWriter) open() uint32 {
	id := w.nextID
	w.nextID += 2
	return id
}

// fuzzSeeds are inputs covering ordinary traffic and abuse: requests,
// bodies, trailers, resets, floods, malformed frames.
func fuzzSeeds() [][]byte {
	get := []byte{opGet, 0}
	post := func(flags byte, n int) []byte { return []byte{opPost, flags, byte(n >> 8), byte(n)} }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	return [][]byte{
		// Requests.
		get,
		cat(get, get, get),
		post(1, 5), post(0, 1000), post(2, 10),
		// A well-formed request with a cookie and te: trailers.
		headers(0, 17, field("cookie", "a=1"), field("te", "trailers")),
		// Trailers with a pseudo-field, with an untrimmed value.
		cat(post(2, 3), fields(field(":method", "GET"))),
		cat(post(2, 3), fields(field("x-a", " padded"))),
		// Field values with whitespace, CR LF, NUL, a big one; an
		// upper-case name.
		headers(0, 17, field("x-a", " padded"), field("x-a", "padded\t")),
		headers(0, 17, field("x-a", "a\r\nb"), field("x-a", "\x00")),
		headers(0, 17, field("x-a", strings.Repeat("v", 4000)), field("X-Upper", "5")),
		// Pseudo-fields missing, repeated, unknown; connection-specific
		// fields.
		headers(0, 1, field(":method", "GET")),
		headers(0, 17, field(":path", "/")),
		headers(0, 17, field(":protocol", "http")),
		headers(0, 17, field("connection", "a=1"), field("transfer-encoding", "trailers"), field("te", "POST")),
		headers(0, 17, field("content-length", "5")),
		// A header block left open, then a CONTINUATION; then a PING
		// instead; a CONTINUATION on its own.
		cat(headers(0, 19, field("x-a", "/")), []byte{opContinuation, 0, 32, 0}),
		cat(headers(0, 19), []byte{opPing, 0, 1, 2, 3, 4, 5, 6, 7, 8}),
		{opContinuation, 0, 32, 0},
		// Resets: of an open stream, of an idle one, of stream 0.
		cat(post(0, 0), []byte{opRSTStream, 2, 8}),
		{opRSTStream, 250, 8},
		{opRSTStream, 210, 8},
		// Settings: a window change, a bad value, acknowledgements of
		// nothing.
		cat([]byte{opSettings, 2, 4, 0, 0, 0, 0, 5, 0, 0, 0x40, 0}, get),
		{opSettings, 1, 4, 0xff, 0xff, 0xff, 0xff},
		{opSettingsAck, opSettingsAck},
		// Window updates: on the connection, too large, of zero.
		{opWindowUpdate, 210, 0, 1, 0, 0},
		{opWindowUpdate, 210, 0x7f, 0xff, 0xff, 0xff, opWindowUpdate, 210, 0x7f, 0xff, 0xff, 0xff},
		cat(get, []byte{opWindowUpdate, 2, 0, 0, 0, 0}),
		// PRIORITY on itself; GOAWAY from the client; raw bytes.
		{opPriority, 0, 0, 16, 0},
		cat(get, []byte{opGoAway, 0, 0}, get),
		{opRaw, 9, 0, 0, 1, 0xff, 0, 0, 0, 0, 1},
		// DATA on an idle stream, padded DATA, DATA past the window.
		{opData, 250, 1, 0, 10},
		cat(post(2, 0), []byte{opData, 2, 3, 0, 100, 20}),
		cat(post(2, 0), []byte{opData, 2, 0, 0x4e, 0x20}, []byte{opData, 2, 0, 0x4e, 0x20}, []byte{opData, 2, 0, 0x4e, 0x20}, []byte{opData, 2, 0, 0x4e, 0x20}),
		// Floods: PING, SETTINGS, Rapid Reset, empty DATA.
		{opFlood, 0, 0x07, 0xd0},
		{opFlood, 1, 0x07, 0xd0},
		{opFlood, 2, 0x07, 0xd0},
		cat(post(2, 0), []byte{opFlood, 3, 0x07, 0xd0}),
		// HPACK: a big field indexed, then referenced; a table size past
		// what relay allows.
		cat(headers(0, 17, field("x-a", strings.Repeat("v", 4000))),
			headers(0, 17, field("x-a", strings.Repeat("v", 4000)), field("x-a", strings.Repeat("v", 4000)))),
		cat([]byte{opTableSize, 0x40, 0, 0x40, 0}, get),
	}
}

// field is the input's bytes for a field whose name is in fuzzNames and
// whose value is in fuzzValues.
func field(name, value string) []byte {
	n, v := slices.Index(fuzzNames, name), slices.Index(fuzzValues, value)
	if n < 0 || v < 0 {
		panic("fuzz seed field not in the lists: " + name + ": " + value)
	}
	return []byte{byte(n << 1), byte(v << 1)}
}

// fields is the input's bytes for a list of fields.
func fields(fs ...[]byte) []byte { return append([]byte{byte(len(fs))}, bytes.Join(fs, nil)...) }

// headers is the input's bytes for a HEADERS frame on the stream stream
// picks, with flags, carrying fs.
func headers(stream, flags byte, fs ...[]byte) []byte {
	return append([]byte{opHeaders, stream, flags}, fields(fs...)...)
}
