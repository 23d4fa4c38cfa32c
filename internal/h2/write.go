package h2

import (
	"strconv"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/h1"
)

// Frames are written by whichever goroutine has them to send: a stream's
// goroutine its response, the connection's goroutine its control frames.
// Each writes under wmu into one buffer, and the last writer in line
// flushes it: frames written while others wait go out together, in one
// TLS record and one write to the rawio.BatchConn below, which gathers
// the writes of all streams into system calls.

// lockWrite takes the write side.
func (c *conn) lockWrite() {
	c.writers.Add(1)
	c.wmu.Lock()
	c.writers.Add(-1)
}

// unlockWrite flushes unless another writer is waiting to add its frames,
// and lets it in. The first failed write closes the connection; the
// buffer keeps its error, so nothing more is written.
func (c *conn) unlockWrite() { c.release(c.writers.Load() == 0) }

// unlockWriteNow is unlockWrite that flushes whoever waits: what was
// written must be out before the connection closes.
func (c *conn) unlockWriteNow() { c.release(true) }

func (c *conn) release(flush bool) {
	var err error
	if flush && c.bw.Buffered() > 0 {
		err = c.bw.Flush()
	}
	first := err != nil && c.werr == nil
	if first {
		c.werr = err
	}
	c.wmu.Unlock()
	if first {
		c.nc.Close()
	}
}

// respond writes a response head and, if data is not nil, the body bytes
// that go with it, ending the stream if end. The head and as much of data
// as the windows allow go out in one write.
func (c *conn) respond(st *stream, status int, fields []h1.Field, length int64, data []byte, end bool) error {
	return c.respondWhole(st, status, fields, length, data, end, nil, nil)
}

// respondWhole is respond with a trailer section, raw, that ends the
// stream after data when end and raw is not nil (endWithTrailers; hops
// as there). A response that came whole, trailers and all, as a unary
// gRPC call's does, leaves in one write when the windows allow.
func (c *conn) respondWhole(st *stream, status int, fields []h1.Field, length int64, data []byte, end bool, raw, hops []byte) error {
	n, err := c.takeWindow(st, len(data), false)
	if err != nil {
		return err
	}
	if err := c.lockFor(st, n); err != nil {
		return err
	}
	whole := end && n == len(data)
	c.writeHead(st.id, status, fields, length, whole && len(data) == 0 && raw == nil)
	if n > 0 {
		c.wfr.WriteData(st.id, whole && raw == nil, data[:n])
		c.dataSent.Add(1)
	}
	if whole && raw != nil {
		c.writeTrailers(st, raw, hops)
	}
	if whole {
		c.ended(st)
	}
	err = c.werr
	c.unlockWrite()
	if err != nil {
		return err
	}
	if status >= 200 {
		st.answered = true
		st.body.answered.Store(true)
	}
	if n == len(data) {
		return nil
	}
	if raw == nil {
		if end && c.keep(st, data[n:], end) {
			return nil // written once the core is done (tail.go)
		}
		return c.writeData(st, data[n:], end)
	}
	if err := c.writeData(st, data[n:], false); err != nil || !end {
		return err
	}
	return c.endWithTrailers(st, raw, hops)
}

// writeData writes p as DATA frames as the windows allow, the last one
// ending the stream if end.
func (c *conn) writeData(st *stream, p []byte, end bool) error {
	for first := true; first || len(p) > 0; first = false {
		n, err := c.takeWindow(st, len(p), true)
		if err != nil {
			return err
		}
		if err := c.lockFor(st, n); err != nil {
			return err
		}
		c.wfr.WriteData(st.id, end && n == len(p), p[:n])
		c.dataSent.Add(1)
		if end && n == len(p) {
			c.ended(st)
		}
		err = c.werr
		c.unlockWrite()
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// lockFor takes the write side for st's frames, for which n bytes of
// window were taken. If st has ended meanwhile it gives the window back
// and fails.
func (c *conn) lockFor(st *stream, n int) error {
	c.lockWrite()
	if st.gone.Load() {
		c.unlockWrite()
		c.unsend(n)
		return errStreamClosed
	}
	return nil
}

// unsend gives back n bytes of connection window taken for a stream that
// ended before they were written: the client never gets them, so it will
// never give them back.
func (c *conn) unsend(n int) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.sendWin += int64(n)
	c.window.Broadcast()
	c.mu.Unlock()
}

// ended notes that st's response is complete; its last frame is written
// but not yet flushed. A stream whose client had ended its side too is
// closed now, before the client can see its end, rather than when its
// goroutine is done, so that a client that has its answer may open the
// next stream at once without finding the stream limit still full. wmu
// is held.
func (c *conn) ended(st *stream) {
	st.ended = true
	c.mu.Lock()
	if st.remoteDone {
		c.endStream(st, errStreamClosed)
	}
	c.mu.Unlock()
}

// takeWindow takes up to want bytes of send window, no more than a frame,
// from the connection and the stream. With wait it waits for some; without,
// it may take none. A stream whose client grants no window for the idle
// timeout fails (watch).
func (c *conn) takeWindow(st *stream, want int, wait bool) (int, error) {
	if want == 0 {
		return 0, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if st.closed {
			return 0, errStreamClosed
		}
		if st.stalled {
			return 0, errStalled
		}
		if c.sendWin > 0 && st.sendWin > 0 {
			n := min(int64(want), c.sendWin, st.sendWin, int64(c.peerFrame.Load()))
			c.sendWin -= n
			st.sendWin -= n
			st.waitingSince = time.Time{}
			return int(n), nil
		}
		if !wait {
			return 0, nil
		}
		if st.waitingSince.IsZero() {
			st.waitingSince = time.Now()
		}
		c.window.Wait()
	}
}

// writeHead encodes a response head into HEADERS and, if it is larger
// than a frame, CONTINUATION frames. wmu is held.
//
// Field names go out in lower case, as HTTP/2 requires; hop-by-hop and
// framing fields stay behind, and the length, if known, is sent as
// content-length.
func (c *conn) writeHead(id uint32, status int, fields []h1.Field, length int64, end bool) {
	c.enc.Begin()
	c.enc.Field(":status", statusText(status))
	for i := range fields {
		f := &fields[i]
		if f.Hop || f.Is("proxy-connection") {
			continue
		}
		c.lower = h1.AppendLower(c.lower[:0], f.Name)
		name := stringOf(c.lower)
		if neverIndexed(name) {
			c.enc.Never(name, stringOf(f.Value))
		} else {
			c.enc.Field(name, stringOf(f.Value))
		}
	}
	if length >= 0 {
		c.lower = strconv.AppendInt(c.lower[:0], length, 10)
		c.enc.Field("content-length", stringOf(c.lower))
	}
	c.writeBlock(id, end)
}

// neverIndexed reports the response fields that go as literals never
// indexed: a cookie, which intermediaries must not index either (RFC
// 7541 7.1.3), and a request id, new with every response.
func neverIndexed(name string) bool { return name == "set-cookie" || name == "x-request-id" }

// writeBlock writes the header block encoded last as a HEADERS frame and, if
// it is larger than a frame, CONTINUATION frames. wmu is held.
func (c *conn) writeBlock(id uint32, end bool) {
	block := c.enc.Block()
	max := int(c.peerFrame.Load())
	frag := block[:min(len(block), max)]
	block = block[len(frag):]
	c.wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: len(block) == 0})
	for len(block) > 0 {
		frag = block[:min(len(block), max)]
		block = block[len(frag):]
		c.wfr.WriteContinuation(id, len(block) == 0, frag)
	}
}

// writeReset sends RST_STREAM.
func (c *conn) writeReset(id uint32, code http2.ErrCode) {
	c.lockWrite()
	c.wfr.WriteRSTStream(id, code)
	c.unlockWrite()
}

// writeCredit gives window back: conn bytes to the connection, strm to
// stream id.
func (c *conn) writeCredit(id uint32, conn, strm int64) {
	if conn == 0 && strm == 0 {
		return
	}
	c.lockWrite()
	if conn > 0 {
		c.wfr.WriteWindowUpdate(0, uint32(conn))
	}
	if strm > 0 {
		c.wfr.WriteWindowUpdate(id, uint32(strm))
	}
	c.unlockWrite()
}
