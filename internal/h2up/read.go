package h2up

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/net/http2"
)

// streamFail is a stream error found reading a frame: the stream is reset
// with code, and its sides fail with err.
type streamFail struct {
	id   uint32
	code http2.ErrCode
	err  error
}

func (e *streamFail) Error() string { return e.err.Error() }

// connFail is a connection error: GOAWAY with code, and the connection
// ends for err.
type connFail struct {
	code http2.ErrCode
	err  error
}

func (e *connFail) Error() string { return e.err.Error() }

func protocolError(format string, args ...any) error {
	return &connFail{http2.ErrCodeProtocol, fmt.Errorf("h2up: "+format, args...)}
}

func streamProtocolError(id uint32, format string, args ...any) error {
	return &streamFail{id, http2.ErrCodeProtocol, fmt.Errorf("h2up: "+format, args...)}
}

// run reads the backend's frames and acts on each until the connection
// ends.
func (c *Conn) run() {
	var err error
	for {
		var f http2.Frame
		f, err = c.hr.ReadFrame()
		if err == nil {
			err = c.handle(f)
		}
		if err != nil && !c.failed(err) {
			break
		}
	}
	c.finish(err)
}

// failed acts on an error reading or handling a frame and reports whether
// the connection goes on: a stream error resets that stream; anything
// else ends the connection, with GOAWAY where the backend broke the
// protocol.
func (c *Conn) failed(err error) bool {
	var sf *streamFail
	var cf *connFail
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &sf):
		c.resetStream(sf.id, sf.code, sf.err)
		return true
	case errors.As(err, &se):
		c.resetStream(se.StreamID, se.Code, fmt.Errorf("h2up: the backend broke the protocol on the stream: %v", se))
		return true
	case errors.As(err, &cf):
		c.abandon(cf.code, cf.err)
	case errors.As(err, &ce):
		c.abandon(http2.ErrCode(ce), fmt.Errorf("h2up: the backend broke the protocol: %s", http2.ErrCode(ce)))
	case errors.Is(err, http2.ErrFrameTooLarge):
		c.abandon(http2.ErrCodeFrameSize, errors.New("h2up: the backend sent a frame over the maximum frame size"))
	case errors.Is(err, errHeaderFlood), errors.Is(err, errCalm):
		c.abandon(http2.ErrCodeEnhanceYourCalm, err)
	}
	return false
}

// abandon ends the connection for the backend's fault.
func (c *Conn) abandon(code http2.ErrCode, err error) {
	c.warn("HTTP/2 backend broke the protocol or abused the connection; connection closed",
		"backend", c.o.Name, "err", err.Error(), "code", code.String())
	c.closeWith(err, code, true)
}

// resetStream resets stream id for relay's reason err, and sends
// RST_STREAM with code.
func (c *Conn) resetStream(id uint32, code http2.ErrCode, err error) {
	c.mu.Lock()
	if s := c.streams[id]; s != nil && !s.reset {
		s.reset = true
		if s.err == nil {
			s.err = err
		}
		if s.waiting {
			c.unwait(s)
		}
		s.wake()
	}
	c.mu.Unlock()
	c.writeReset(id, code)
}

// handle acts on one frame.
func (c *Conn) handle(f http2.Frame) error {
	if !c.sawSettings {
		// The server's preface is a SETTINGS frame (RFC 9113 3.4).
		if _, ok := f.(*http2.SettingsFrame); !ok {
			return protocolError("the backend's first frame was %s, not SETTINGS", f.Header().Type)
		}
		c.sawSettings = true
	}
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.MetaHeadersFrame:
		return c.onHeaders(f)
	case *http2.SettingsFrame:
		if !f.IsAck() && c.spend() {
			return errCalm
		}
		return c.onSettings(f)
	case *http2.WindowUpdateFrame:
		if c.spend() {
			return errCalm
		}
		return c.onWindowUpdate(f)
	case *http2.RSTStreamFrame:
		if c.spend() {
			return errCalm
		}
		return c.onReset(f)
	case *http2.PingFrame:
		if !f.IsAck() && c.spend() {
			return errCalm
		}
		return c.onPing(f)
	case *http2.GoAwayFrame:
		if c.spend() {
			return errCalm
		}
		c.onGoAway(f)
		return nil
	case *http2.PushPromiseFrame:
		// relay's SETTINGS_ENABLE_PUSH is 0 (RFC 9113 8.4).
		return protocolError("the backend pushed (PUSH_PROMISE) though push is off")
	}
	// PRIORITY and unknown frame types are ignored (RFC 9113 5.5), but
	// counted.
	if c.spend() {
		return errCalm
	}
	return nil
}

// known reports whether id is a stream relay opened (it may have ended
// since), or fails for one relay never opened. mu is held.
func (c *Conn) known(id uint32, t http2.FrameType) error {
	if id%2 == 0 || id >= c.nextID {
		return protocolError("the backend sent %s on stream %d, which relay never opened", t, id)
	}
	return nil
}

// onData takes body bytes for a stream.
func (c *Conn) onData(f *http2.DataFrame) error {
	id, n := f.StreamID, int64(f.Length)
	data := f.Data()
	c.mu.Lock()
	if n > c.recvWin {
		c.mu.Unlock()
		return &connFail{http2.ErrCodeFlowControl, errors.New("h2up: the backend sent DATA beyond the connection's window")}
	}
	// The connection's window is given back as DATA arrives, whatever
	// becomes of it.
	c.recvWin -= n
	c.unacked += n
	s := c.streams[id]
	if s == nil || s.reset {
		err := c.known(id, http2.FrameData)
		c.mu.Unlock()
		if err != nil {
			return err
		}
		c.creditConn()
		// Frames in flight for a stream relay closed are ignored; a
		// stream of empty ones is a flood.
		if len(data) == 0 && c.spend() {
			return errCalm
		}
		return nil
	}
	var err error
	switch {
	case s.remoteDone:
		err = &streamFail{id, http2.ErrCodeStreamClosed, errors.New("h2up: the backend sent DATA after the end of the stream")}
	case !s.final:
		err = streamProtocolError(id, "the backend sent DATA before the response head")
	case n > s.recvWin:
		err = &streamFail{id, http2.ErrCodeFlowControl, errors.New("h2up: the backend sent DATA beyond the stream's window")}
	default:
		s.got += int64(len(data))
		err = s.checkContent(f.StreamEnded())
	}
	if err != nil {
		c.mu.Unlock()
		c.creditConn()
		return err
	}
	s.recvWin -= n
	s.unacked += n - int64(len(data)) // the padding is consumed at once
	if len(data) > 0 {
		s.appendData(data, int(c.o.StreamWindow))
	}
	ended := f.StreamEnded()
	if ended {
		s.remoteDone = true
	}
	s.last.Store(c.readAt)
	s.wakeRead()
	c.mu.Unlock()
	c.creditConn()
	if len(data) == 0 && !ended && c.spend() {
		return errCalm
	}
	return nil
}

// onHeaders takes a response head or trailers.
func (c *Conn) onHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	if s == nil || s.reset {
		if err := c.known(id, http2.FrameHeaders); err != nil {
			return err
		}
		if c.spend() {
			return errCalm
		}
		return nil
	}
	if s.remoteDone {
		return &streamFail{id, http2.ErrCodeStreamClosed, errors.New("h2up: the backend sent HEADERS after the end of the stream")}
	}
	s.last.Store(c.readAt)
	if f.Truncated {
		return &streamFail{id, http2.ErrCodeCancel, fmt.Errorf("h2up: the backend's response head is over the limit of %d bytes", c.o.MaxHeaderBytes)}
	}
	if s.final {
		// Trailers: they end the stream and carry no pseudo-fields (RFC
		// 9113 8.1).
		if !f.StreamEnded() {
			return streamProtocolError(id, "the backend sent a second header block that does not end the stream")
		}
		if len(f.PseudoFields()) > 0 {
			return streamProtocolError(id, "the backend's trailers carry pseudo-fields")
		}
		if err := s.checkContent(true); err != nil {
			return err
		}
		s.trailers = s.keepFields(f.RegularFields())
		s.remoteDone = true
		s.wakeRead()
		return nil
	}
	h, err := parseHead(f)
	if err != nil {
		return err
	}
	h.Fields = s.keepFields(h.Fields)
	if h.Status < 200 {
		if f.StreamEnded() {
			return streamProtocolError(id, "the backend ended the stream with an informational (%d) head", h.Status)
		}
		if s.interim++; s.interim > maxInterim {
			return &streamFail{id, http2.ErrCodeEnhanceYourCalm, fmt.Errorf("h2up: the backend sent more than %d informational (1xx) heads on one stream", maxInterim)}
		}
	} else {
		s.content = h.ContentLength
		if s.headReq || h.Status == 204 || h.Status == 304 {
			// Defined to have no content, whatever content-length says
			// (RFC 9110 6.4.1).
			s.content = 0
		}
		if err := s.checkContent(f.StreamEnded()); err != nil {
			return err
		}
		s.final = true
		h.End = f.StreamEnded()
		s.remoteDone = h.End
	}
	s.heads = append(s.heads, h)
	s.wakeRead()
	return nil
}

// maxInterim bounds the informational (1xx) heads one response may have:
// a backend sends one or two (100 Continue, 103 Early Hints), and each
// is a head relay holds and passes on.
const maxInterim = 16

// checkContent fails the stream when the body that came does not fit
// the length its head promised: past it, or short of it at the end
// (ended). A client framing the message by that length would read the
// difference as part of another message (RFC 9113 8.1.1). c.mu is held.
func (s *Stream) checkContent(ended bool) error {
	if s.content < 0 || (s.got <= s.content && (!ended || s.got == s.content)) {
		return nil
	}
	return streamProtocolError(s.id, "the backend sent %d bytes of content where its response head promised %d", s.got, s.content)
}

// parseHead checks a response head's pseudo-fields: :status alone, three
// digits, not 101 (HTTP/2 has no upgrade), and its content-length.
func parseHead(f *http2.MetaHeadersFrame) (Head, error) {
	id := f.StreamID
	pseudo := f.PseudoFields()
	if len(pseudo) != 1 || pseudo[0].Name != ":status" {
		return Head{}, streamProtocolError(id, "the backend's response head has no :status, or other pseudo-fields")
	}
	v := pseudo[0].Value
	status, err := strconv.Atoi(v)
	if err != nil || len(v) != 3 || status < 100 || status == 101 {
		return Head{}, streamProtocolError(id, "the backend's response :status %q is not valid", v)
	}
	h := Head{Status: status, Fields: f.RegularFields(), ContentLength: -1}
	for _, fl := range h.Fields {
		if fl.Name != "content-length" {
			continue
		}
		n, err := strconv.ParseInt(fl.Value, 10, 64)
		if err != nil || n < 0 || (h.ContentLength >= 0 && n != h.ContentLength) {
			return Head{}, streamProtocolError(id, "the backend's content-length %q is not valid", fl.Value)
		}
		h.ContentLength = n
	}
	return h, nil
}

// onSettings applies the backend's settings and acknowledges them. The
// write side is held from before the first value is applied until the
// ACK is written, so that no frame relying on the old values goes out
// after it.
func (c *Conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}
	c.lockWrite()
	err := f.ForeachSetting(func(st http2.Setting) error {
		if err := st.Valid(); err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		switch st.ID {
		case http2.SettingMaxConcurrentStreams:
			c.peerMax = st.Val
		case http2.SettingInitialWindowSize:
			// The change applies to every open stream's window (RFC
			// 9113 6.9.2).
			delta := int64(st.Val) - c.peerInit
			c.peerInit = int64(st.Val)
			for _, s := range c.streams {
				s.sendWin += delta
				if s.sendWin > maxWindow {
					return &connFail{http2.ErrCodeFlowControl, errors.New("h2up: the backend's SETTINGS_INITIAL_WINDOW_SIZE overflows a stream's window")}
				}
				if delta > 0 {
					s.wakeWrite()
				}
			}
		case http2.SettingMaxFrameSize:
			c.peerFrame.Store(st.Val)
		case http2.SettingHeaderTableSize:
			// The encoder's table stays within what the backend's
			// decoder keeps; it tells the backend of a smaller one at
			// the start of the next header block (RFC 7541 4.2). wmu
			// is held.
			c.enc.SetLimit(st.Val)
		}
		return nil
	})
	if err == nil {
		c.settledOnce.Do(func() { close(c.settled) })
	}
	if err == nil {
		c.wfr.WriteSettingsAck()
	}
	c.unlockWrite()
	return err
}

// onWindowUpdate grows a send window.
func (c *Conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	id, inc := f.StreamID, int64(f.Increment)
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == 0 {
		c.sendWin += inc
		c.granted += inc
		if c.sendWin > maxWindow {
			return &connFail{http2.ErrCodeFlowControl, errors.New("h2up: the backend's WINDOW_UPDATE overflows the connection's window")}
		}
		c.wakeWaiters()
		return nil
	}
	s := c.streams[id]
	if s == nil || s.reset {
		return c.known(id, http2.FrameWindowUpdate)
	}
	s.sendWin += inc
	if s.sendWin > maxWindow {
		return &streamFail{id, http2.ErrCodeFlowControl, errors.New("h2up: the backend's WINDOW_UPDATE overflows the stream's window")}
	}
	s.last.Store(c.readAt)
	s.wakeWrite()
	return nil
}

// onReset ends a stream the backend reset.
func (c *Conn) onReset(f *http2.RSTStreamFrame) error {
	id := f.StreamID
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streams[id]
	if s == nil || s.reset {
		return c.known(id, http2.FrameRSTStream)
	}
	s.reset = true
	if f.ErrCode == http2.ErrCodeRefusedStream {
		s.err = errRefusedStream
	} else {
		s.err = StreamError{Code: f.ErrCode}
	}
	if s.waiting {
		c.unwait(s)
	}
	s.last.Store(c.readAt)
	s.wake()
	return nil
}

// onPing answers a PING, or takes the answer to relay's own.
func (c *Conn) onPing(f *http2.PingFrame) error {
	if f.IsAck() {
		c.mu.Lock()
		if c.pingOut && f.Data == c.pingData {
			c.pingOut = false
			c.pingTimer.Stop()
		}
		c.mu.Unlock()
		return nil
	}
	c.lockWrite()
	c.wfr.WritePing(true, f.Data)
	c.unlockWrite()
	return nil
}

// onGoAway stops the connection taking streams; those past the GOAWAY's
// last stream id were not processed, and fail with ErrRefused.
func (c *Conn) onGoAway(f *http2.GoAwayFrame) {
	c.mu.Lock()
	if !c.goneAway || f.LastStreamID < c.lastID {
		c.lastID = f.LastStreamID
	}
	c.goneAway = true
	for id, s := range c.streams {
		if id > c.lastID && !s.reset {
			s.reset = true
			s.err = errGoneAway
			if s.waiting {
				c.unwait(s)
			}
			s.wake()
		}
	}
	closeNow := c.open == 0
	c.mu.Unlock()
	if f.ErrCode != http2.ErrCodeNo {
		c.warn("HTTP/2 backend sent GOAWAY with an error", "backend", c.o.Name,
			"code", f.ErrCode.String(), "debug", string(f.DebugData()), "last_stream", f.LastStreamID)
	}
	if closeNow {
		c.Close()
	}
}

// Ping sends a PING; if its ACK does not come within timeout, the
// connection is closed.
func (c *Conn) Ping(timeout time.Duration) {
	c.mu.Lock()
	if c.closing || c.pingOut {
		c.mu.Unlock()
		return
	}
	c.pingOut = true
	c.pingSeq++
	seq := c.pingSeq
	for i := range c.pingData {
		c.pingData[i] = byte(seq >> (8 * i))
	}
	data := c.pingData
	c.pingTimer = time.AfterFunc(timeout, func() {
		c.mu.Lock()
		late := c.pingOut && c.pingSeq == seq
		c.mu.Unlock()
		if late {
			c.warn("HTTP/2 backend answered no PING in time; connection closed", "backend", c.o.Name, "timeout", timeout.String())
			c.closeWith(errPingTimeout, http2.ErrCodeNo, false)
		}
	})
	c.mu.Unlock()
	c.lockWrite()
	c.wfr.WritePing(false, data)
	c.unlockWrite()
}
