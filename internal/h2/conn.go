package h2

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
	"relay/internal/hblock"
)

// What relay grants a client for request bodies. Unread body bytes are
// held in memory, so the connection's window bounds what one client can
// make relay hold; a stream may use all of it.
const (
	streamWindow = 1 << 20
	connWindow   = 1 << 20
	// windowUpdateAt is how many consumed bytes wait before their
	// window is given back, so a body costs a WINDOW_UPDATE per 32 KiB
	// rather than one per read.
	windowUpdateAt = 32 << 10
	maxWindow      = 1<<31 - 1
	// maxFrameRead is the largest frame relay accepts: the default,
	// since relay does not advertise another.
	maxFrameRead = 16384
	// readBufferSize is the read buffer under the framer.
	readBufferSize = 4096
	// writeBufferSize is the buffer frames are written into; a flush
	// hands it to the connection in one write.
	writeBufferSize = 16384
)

// lingerBytes bounds what relay reads from a client after a GOAWAY for a
// protocol error: a flood is cut off, not drained.
const lingerBytes = 64 << 10

// conn is one HTTP/2 connection.
type conn struct {
	srv  *Server
	nc   net.Conn
	br   *bufio.Reader
	in   frameReader    // what fr reads from: serve's goroutine only
	fr   *http2.Framer  // reads: serve's goroutine only
	hr   *hblock.Reader // reads fr, header blocks whole
	peer core.Peer
	runq chan *stream // idle runners wait here for a stream (runner.go)
	idle atomic.Int32 // how many wait

	// The write side (write.go), under wmu.
	wmu     sync.Mutex
	writers atomic.Int32 // goroutines waiting for wmu: the last one flushes
	bw      *bufio.Writer
	wfr     *http2.Framer
	enc     *hblock.Encoder
	lower   []byte // a field name in lower case
	werr    error  // the first write error: nothing more is written
	// peerFrame is the largest frame the client accepts.
	peerFrame atomic.Uint32
	// Signs of life for the idle watch (life): frames read, and writes
	// the connection took.
	frames, writes atomic.Uint64
	// dataSent counts the DATA frames written, which pay for the
	// client's control frames (abuse.go).
	dataSent atomic.Uint64

	// Streams and flow control, under mu.
	mu       sync.Mutex
	window   sync.Cond // send windows grew, or streams ended
	streams  map[uint32]*stream
	sendWin  int64 // what relay may still send on the connection
	peerWin  int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE
	recvWin  int64 // what the client may still send on the connection
	unacked  int64 // consumed connection window not yet given back
	running  int   // stream goroutines that have not returned
	tails    int64 // response bytes streams hold for the client (tail.go)
	idleFrom time.Time
	ab       abuse // the bounds on abuse (abuse.go)
	// maxID is the highest stream the client opened; goAwayID the last
	// one relay serves after sending GOAWAY.
	maxID     uint32
	goingAway bool
	goAwayID  uint32
	closed    bool
	// The idle watch (watch).
	timer      *time.Timer
	framesSeen uint64
	pingSent   time.Time // when the PING awaiting an answer went out
	lingering  bool      // closeSoon was called
	// resets are the last streams relay reset or refused, whose frames
	// in flight are ignored.
	resets [64]uint32
	nreset int
	// padID's window for the padding of its last DATA frame, padN bytes,
	// is to be given back.
	padID uint32
	padN  int64
	// fb bounds what header blocks decode to and what open streams'
	// header lists hold (budget.go).
	fb fieldBudget

	// serve's goroutine only.
	sawSettings  bool
	unackedSends int // SETTINGS relay sent that the client has not acknowledged
}

var (
	errStreamClosed = errors.New("h2: stream closed")
	errConnClosed   = errors.New("h2: connection closed")
)

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{srv: s, nc: nc, streams: make(map[uint32]*stream), runq: make(chan *stream)}
	c.window.L = &c.mu
	c.fb.init(&s.lim)
	c.br = bufio.NewReaderSize(countReads{nc, &c.fb.wire}, readBufferSize)
	// The deadline serve sets for the preface holds until the first
	// frame is read whole.
	c.in = frameReader{c: c, r: c.br, armed: s.lim.HeaderTimeout > 0}
	c.fr = http2.NewFramer(nil, &c.in)
	c.fr.SetMaxReadFrameSize(maxFrameRead)
	// The frame reader stops decoding a header list at twice the limit,
	// so that a list, or a single field, a little over it is still read
	// and answered 431 (view); past that the connection is closed.
	c.fr.MaxHeaderListSize = 2 * uint32(s.lim.MaxHeaderBytes)
	c.hr = hblock.NewReader(c.fr, &c.in)
	c.fr.SetReuseFrames()
	c.bw = bufio.NewWriterSize(countWrites{nc, &c.writes}, writeBufferSize)
	c.wfr = http2.NewFramer(c.bw, nil)
	c.enc = hblock.NewEncoder()
	c.peerFrame.Store(16384)
	c.sendWin, c.peerWin, c.recvWin = 65535, 65535, connWindow
	var addr = c.remoteAddr()
	tc, isTLS := nc.(*tls.Conn)
	c.peer = s.core.NewPeer(addr, isTLS)
	if isTLS {
		cs := tc.ConnectionState()
		c.peer.Client = s.core.ClientTLSOf(&cs)
	}
	c.idleFrom = time.Now()
	c.ab.budget, c.ab.refilled = controlBudget, c.idleFrom
	return c
}

// serve reads the connection's frames and acts on each until the
// connection ends.
func (c *conn) serve() {
	defer c.close()
	lim := &c.srv.lim
	c.mu.Lock()
	if lim.HeaderTimeout > 0 && !c.lingering {
		c.nc.SetReadDeadline(time.Now().Add(lim.HeaderTimeout))
	}
	c.mu.Unlock()
	var pre [len(http2.ClientPreface)]byte
	if _, err := io.ReadFull(c.br, pre[:]); err != nil || string(pre[:]) != http2.ClientPreface {
		return
	}
	if lim.IdleTimeout > 0 {
		c.mu.Lock()
		c.timer = time.AfterFunc(lim.IdleTimeout, c.watch)
		c.mu.Unlock()
	}
	for {
		f, err := c.hr.ReadFrame()
		if err == nil {
			c.frames.Add(1)
			err = c.handle(f)
			switch f.(type) {
			case *http2.DataFrame, *http2.RSTStreamFrame:
				// Bytes no stream will read give the connection's
				// window back.
				c.giveBack()
			}
			if c.ab.overdrawn {
				err = c.flood(f.Header().Type)
			}
		}
		if err != nil && !c.failed(err) {
			return
		}
	}
}

// sendPreface sends relay's SETTINGS, the server's connection preface,
// and opens the connection's window beyond the default.
func (c *conn) sendPreface() {
	lim := &c.srv.lim
	c.lockWrite()
	c.wfr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: uint32(lim.MaxConcurrentStreams)},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: uint32(lim.MaxHeaderBytes)},
	)
	c.wfr.WriteWindowUpdate(0, connWindow-65535)
	c.unlockWrite()
	c.unackedSends = 1
}

// failed acts on an error reading or handling a frame and reports whether
// the connection goes on: a stream error resets that stream; anything
// else ends the connection, with GOAWAY where the protocol was broken.
func (c *conn) failed(err error) bool {
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se):
		c.mu.Lock()
		if se.StreamID > c.maxID {
			// A request refused as it arrived still opened its stream:
			// later frames for it are on a closed stream.
			c.maxID = se.StreamID
			c.ab.opened++
		}
		st := c.streams[se.StreamID]
		if st != nil {
			c.endStream(st, errStreamClosed)
		}
		c.noteReset(se.StreamID)
		// The client's fault: a wasted stream (abuse.go).
		c.ab.wasted++
		abusive := c.wastedTooMuch()
		opened, wasted := c.ab.opened, c.ab.wasted
		c.mu.Unlock()
		c.writeReset(se.StreamID, se.Code)
		c.giveBack()
		if abusive {
			if c.cutForWaste(opened, wasted) {
				c.goAway(http2.ErrCodeEnhanceYourCalm, true)
			}
			return false
		}
		return true
	case errors.Is(err, errFrameTimeout):
		c.srv.log.Debug("HTTP/2 client left a frame or header block unfinished for the header timeout; connection closed",
			"client", c.nc.RemoteAddr().String())
		c.goAway(http2.ErrCodeEnhanceYourCalm, false)
	case errors.As(err, &ce):
		c.goAway(http2.ErrCode(ce), true)
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.goAway(http2.ErrCodeFrameSize, true)
	case c.draining():
		// A stream's goroutine cut the client off (calmFromStream).
		c.nc.SetReadDeadline(time.Now().Add(goAwayLinger))
		io.CopyN(io.Discard, c.br, lingerBytes)
	default:
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			c.srv.log.Debug("HTTP/2 connection ended", "client", c.nc.RemoteAddr().String(), "err", err.Error())
		}
	}
	return false
}

// handle acts on one frame.
func (c *conn) handle(f http2.Frame) error {
	if !c.sawSettings {
		// The preface ends with the client's SETTINGS (RFC 9113 3.4).
		if _, ok := f.(*http2.SettingsFrame); !ok {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		c.sawSettings = true
	}
	switch f.(type) {
	case *http2.MetaHeadersFrame, *http2.DataFrame:
		// Requests and their bodies: the Rapid Reset rule and onData
		// count what they cost.
	default:
		c.spend()
	}
	if mh, ok := f.(*http2.MetaHeadersFrame); ok {
		// Every header block decoded counts, those of streams past a
		// GOAWAY too.
		if err := c.chargeFields(mh); err != nil {
			return err
		}
	}
	if id := f.Header().StreamID; id != 0 && c.ignored(id) {
		// After GOAWAY, streams past its last one are not served; their
		// DATA still counts against the connection's window.
		if d, ok := f.(*http2.DataFrame); ok {
			return c.discard(d)
		}
		if _, ok := f.(*http2.MetaHeadersFrame); ok {
			c.spend()
		}
		return nil
	}
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		return c.onHeaders(f)
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		return c.onReset(f)
	case *http2.PingFrame:
		return c.onPing(f)
	case *http2.PriorityFrame:
		if f.StreamDep == f.StreamID {
			return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeProtocol}
		}
		return nil
	case *http2.GoAwayFrame:
		c.shutdown()
		return nil
	case *http2.PushPromiseFrame:
		// Only servers push (RFC 9113 8.4).
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	return nil // unknown frame types are ignored (RFC 9113 5.5)
}

// ignored reports whether a frame for stream id arrived past relay's
// GOAWAY.
func (c *conn) ignored(id uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goingAway && id > c.goAwayID
}

// onSettings applies the client's settings and acknowledges them. The
// write side is held from before the first value is applied until the
// ACK is written, so that the ACK goes out ahead of any frame relying on
// the new values (RFC 9113 6.5.3): DATA that a raised
// SETTINGS_INITIAL_WINDOW_SIZE lets a stream send is written after it. A
// client may wait for the ACK before it looks for that DATA (h2spec
// does). Taken only for the ACK, the write side could go first to a
// stream's goroutine that held it when the window grew (writing its
// HEADERS), which takes the new window and, already running, beats this
// goroutine woken for the lock.
func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		c.unackedSends--
		if c.unackedSends < 0 {
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return nil
	}
	if f.NumSettings() > 100 {
		// More than the settings there are: not a client's.
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	c.lockWrite()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			// The change applies to every open stream's window (RFC
			// 9113 6.9.2).
			c.mu.Lock()
			defer c.mu.Unlock()
			delta := int64(s.Val) - c.peerWin
			c.peerWin = int64(s.Val)
			for _, st := range c.streams {
				st.sendWin += delta
				if st.sendWin > maxWindow {
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
			c.window.Broadcast()
		case http2.SettingMaxFrameSize:
			c.peerFrame.Store(s.Val)
		case http2.SettingHeaderTableSize:
			// The encoder's table stays within what the client's
			// decoder keeps, and the next header block says so (RFC
			// 7541 4.2). relay never pushes, so ENABLE_PUSH needs
			// nothing.
			c.enc.SetLimit(s.Val)
		}
		return nil
	})
	if err == nil {
		c.wfr.WriteSettingsAck()
	}
	c.unlockWrite()
	return err
}

// onWindowUpdate grows a send window.
func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	inc := int64(f.Increment)
	if f.StreamID == 0 {
		c.sendWin += inc
		if c.sendWin > maxWindow {
			return http2.ConnectionError(http2.ErrCodeFlowControl)
		}
		c.window.Broadcast()
		return nil
	}
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.maxID {
			return http2.ConnectionError(http2.ErrCodeProtocol) // idle stream
		}
		return nil // a stream that just ended
	}
	st.sendWin += inc
	if st.sendWin > maxWindow {
		return http2.StreamError{StreamID: f.StreamID, Code: http2.ErrCodeFlowControl}
	}
	c.window.Broadcast()
	return nil
}

// onReset ends a stream the client cancelled.
func (c *conn) onReset(f *http2.RSTStreamFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[f.StreamID]
	if st == nil {
		if f.StreamID > c.maxID {
			return http2.ConnectionError(http2.ErrCodeProtocol) // idle stream
		}
		return nil
	}
	st.resetByClient = true
	c.endStream(st, errStreamClosed)
	return nil
}

// onPing answers a PING, or takes the answer to relay's own.
func (c *conn) onPing(f *http2.PingFrame) error {
	if f.StreamID != 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol)
	}
	if f.IsAck() {
		return nil // any frame counts as a sign of life (watch)
	}
	c.lockWrite()
	c.wfr.WritePing(true, f.Data)
	c.unlockWrite()
	return nil
}

// endStream removes st from the open streams, with err for its body's
// reader, and gives back the connection window its unread body held.
// Its goroutine, if still running, finds the stream gone. mu is held.
func (c *conn) endStream(st *stream, err error) {
	if c.streams[st.id] != st {
		return
	}
	delete(c.streams, st.id)
	st.gone.Store(true)
	st.closed = true
	if n := st.body.drop(err); n > 0 {
		c.unacked += int64(n)
	}
	if len(c.streams) == 0 {
		c.idleFrom = time.Now()
	}
	c.window.Broadcast()
}

// watch runs every IdleTimeout: it closes an idle connection, and PINGs a
// silent one whose streams are open, closing it if the PING goes
// unanswered. It also ends the streams whose client has granted no window
// for as long.
func (c *conn) watch() {
	lim := &c.srv.lim
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	now := time.Now()
	if len(c.streams) == 0 && c.running == 0 {
		if wait := c.idleFrom.Add(lim.IdleTimeout).Sub(now); wait > 0 {
			c.timer.Reset(wait)
			c.mu.Unlock()
			return
		}
		// A stream may yet arrive before the GOAWAY: keep watching.
		c.timer.Reset(lim.IdleTimeout)
		c.mu.Unlock()
		c.shutdown()
		return
	}
	for _, st := range c.streams {
		if !st.waitingSince.IsZero() && now.Sub(st.waitingSince) >= lim.IdleTimeout {
			st.stalled = true
			c.window.Broadcast()
		}
	}
	c.timer.Reset(lim.IdleTimeout)
	frames := c.life()
	writing := !c.wmu.TryLock() // a write waits for the client to take bytes
	if !writing {
		c.wmu.Unlock()
	}
	switch {
	case writing:
		// The socket's WriteWait bounds a client that takes nothing;
		// a slow one is not asked to answer a PING stuck behind the
		// bytes it has yet to read.
		c.framesSeen, c.pingSent = frames, time.Time{}
	case frames != c.framesSeen:
		c.framesSeen, c.pingSent = frames, time.Time{}
	case c.pingSent.IsZero():
		c.pingSent = now
		c.mu.Unlock()
		// The PING's own flush is not the client's doing; a frame that
		// arrives while it is written is.
		read := c.frames.Load()
		c.lockWrite()
		c.wfr.WritePing(false, [8]byte{'r', 'e', 'l', 'a', 'y'})
		c.unlockWrite()
		c.mu.Lock()
		c.framesSeen = read + c.writes.Load()
		c.mu.Unlock()
		return
	case now.Sub(c.pingSent) >= pingTimeout:
		c.mu.Unlock()
		c.srv.log.Debug("HTTP/2 client answered no PING; connection closed", "client", c.nc.RemoteAddr().String())
		c.nc.Close()
		return
	}
	c.mu.Unlock()
}

// life counts the client's signs of life: frames read from it, and
// writes the connection took, which it takes only as fast as the client
// reads (a client that stops reading blocks them).
func (c *conn) life() uint64 { return c.frames.Load() + c.writes.Load() }

// countWrites counts the writes that went through to the connection.
type countWrites struct {
	w io.Writer
	n *atomic.Uint64
}

func (cw countWrites) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	if err == nil {
		cw.n.Add(1)
	}
	return n, err
}

// shutdown sends GOAWAY: the streams open go on, no new one is served,
// and the connection closes when the last one ends.
func (c *conn) shutdown() { c.shutdownWith(http2.ErrCodeNo, nil) }

// shutdownWith is shutdown with the GOAWAY's error code and debug data,
// which says why.
func (c *conn) shutdownWith(code http2.ErrCode, debug []byte) {
	c.mu.Lock()
	if c.goingAway || c.closed {
		c.mu.Unlock()
		return
	}
	c.goingAway, c.goAwayID = true, c.maxID
	last := c.goAwayID
	done := len(c.streams) == 0 && c.running == 0
	c.mu.Unlock()
	c.lockWrite()
	c.wfr.WriteGoAway(last, code, debug)
	c.unlockWrite()
	if done {
		c.closeSoon()
	}
}

// closeSoon ends a connection that has nothing left to serve: reading
// goes on until the client, which has its GOAWAY, closes, or for
// goAwayLinger. Closing at once with the client's bytes unread would
// reset the connection, and the client could lose what relay sent last.
func (c *conn) closeSoon() {
	c.mu.Lock()
	c.lingering = true
	c.nc.SetReadDeadline(time.Now().Add(goAwayLinger))
	c.mu.Unlock()
}

// noteReset remembers that relay reset stream id. mu is held.
func (c *conn) noteReset(id uint32) {
	c.resets[c.nreset%len(c.resets)] = id
	c.nreset++
}

// wasReset reports whether relay reset stream id lately. mu is held.
func (c *conn) wasReset(id uint32) bool {
	for _, r := range c.resets {
		if r == id {
			return true
		}
	}
	return false
}

// goAway sends GOAWAY with code, once, and closes the connection. After a
// protocol error it first reads what the client still sends, for up to
// goAwayLinger and lingerBytes, so that closing with unread bytes does not
// reset the connection before the client has read the GOAWAY.
func (c *conn) goAway(code http2.ErrCode, linger bool) {
	c.mu.Lock()
	sent := c.ab.goneAway
	if sent == nil {
		c.ab.goneAway = make(chan struct{})
		defer close(c.ab.goneAway)
	}
	c.goingAway = true
	last := c.maxID
	c.mu.Unlock()
	if sent != nil {
		// Another goroutine sends it, and closes the connection.
		<-sent
		return
	}
	c.lockWrite()
	c.wfr.WriteGoAway(last, code, nil)
	c.unlockWriteNow()
	if linger {
		c.nc.SetReadDeadline(time.Now().Add(goAwayLinger))
		io.CopyN(io.Discard, c.br, lingerBytes)
	}
	c.nc.Close()
}

// close ends the connection: its streams' goroutines find their streams
// gone and their writes failing.
func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	for _, st := range c.streams {
		c.endStream(st, errConnClosed)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	sending := c.ab.goneAway
	c.mu.Unlock()
	if sending != nil {
		// A GOAWAY a stream's goroutine sends goes out first.
		<-sending
	}
	c.nc.Close()
	// The connection is done when the work it started is: its streams'
	// goroutines see it gone at their next look (core.Responder.Gone).
	c.mu.Lock()
	for c.running > 0 {
		c.window.Wait()
	}
	c.mu.Unlock()
	close(c.runq) // idle runners end (runner.go)
}

// remoteAddr is the client's address and port.
func (c *conn) remoteAddr() (a netip.AddrPort) {
	if t, ok := c.nc.RemoteAddr().(*net.TCPAddr); ok {
		return t.AddrPort()
	}
	return a
}
