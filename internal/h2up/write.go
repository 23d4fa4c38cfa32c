package h2up

import (
	"fmt"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Frames are written by whichever goroutine has them to send: a stream's
// writer its request, its reader the window it gives back, the reading
// goroutine its ACKs and resets. Each writes under wmu into one buffer and
// the last writer in line flushes it, so frames of several streams written
// while others wait go out in one write.
//
// Every write to the socket is bounded by WriteTimeout: a backend that
// stops reading loses the connection, and its streams fail, rather than
// holding them for ever. Lock order: wmu before mu, never the other way.

// lockWrite takes the write side, and sees that the socket's write
// deadline lies between 3/4 of WriteTimeout and WriteTimeout ahead (it is
// moved only when it has come closer, so most locks cost no timer).
func (c *Conn) lockWrite() {
	c.writers.Add(1)
	c.wmu.Lock()
	c.writers.Add(-1)
	if c.werr == nil {
		c.lockAt = clock()
		if time.Duration(c.lockAt) > c.wdl-c.o.WriteTimeout*3/4 {
			c.wdl = time.Duration(c.lockAt) + c.o.WriteTimeout
			c.nc.SetWriteDeadline(epoch.Add(c.wdl))
		}
	}
}

// unlockWrite flushes unless another writer is waiting to add its frames,
// and lets it in. It returns the connection's write error, if any.
func (c *Conn) unlockWrite() error { return c.release(c.writers.Load() == 0) }

// unlockWriteNow is unlockWrite that flushes whoever waits.
func (c *Conn) unlockWriteNow() error { return c.release(true) }

// release lets the write side go. The first failed write closes the
// connection; the buffer keeps its error, so nothing more is written.
func (c *Conn) release(flush bool) error {
	if c.werr == nil {
		// A frame larger than the buffer goes to the socket at once, so
		// the buffer's error is looked at even when nothing is flushed
		// (a write of nothing returns it).
		var err error
		if flush {
			err = c.bw.Flush()
		} else {
			_, err = c.bw.Write(nil)
		}
		if err != nil {
			c.werr = fmt.Errorf("h2up: writing to the backend: %w", err)
			c.mu.Lock()
			if c.cause == nil {
				c.cause = c.werr
			}
			c.closing = true
			c.mu.Unlock()
			werr := c.werr
			c.wmu.Unlock()
			c.nc.Close()
			return werr
		}
	}
	err := c.werr
	c.wmu.Unlock()
	return err
}

// writeBlock encodes fields into a HEADERS frame and, if they take more
// than a frame, CONTINUATION frames; fields marked Sensitive go as
// literals never indexed. trailers says the block is a trailer section.
// wmu is held.
func (c *Conn) writeBlock(id uint32, fields []hpack.HeaderField, end, trailers bool) {
	if trailers {
		c.enc.BeginTrailers()
	} else {
		c.enc.Begin()
	}
	for _, f := range fields {
		if f.Sensitive {
			c.enc.Never(f.Name, f.Value)
		} else {
			c.enc.Field(f.Name, f.Value)
		}
	}
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
	c.sent.Add(1)
}

// writeReset sends RST_STREAM.
func (c *Conn) writeReset(id uint32, code http2.ErrCode) {
	c.lockWrite()
	c.wfr.WriteRSTStream(id, code)
	c.unlockWrite()
}

// writeCredit gives n bytes of window back to stream id (0: the
// connection).
func (c *Conn) writeCredit(id uint32, n int64) {
	c.lockWrite()
	c.wfr.WriteWindowUpdate(id, uint32(n))
	c.unlockWrite()
}
