package h2up

// Flow control. Sending: a stream's DATA takes window from the stream and
// the connection, at most a frame at a time, and waits for the backend's
// WINDOW_UPDATE when either is spent. Receiving: relay gives every stream
// StreamWindow and gives it back only as Read takes the bytes, so what
// relay holds for a stream is bounded by it; the connection's window is
// given back as DATA arrives, so a stream whose reader stops never stalls
// the others.

// take takes up to want bytes of send window, no more than a frame, from
// the connection and s, waiting for some until the write deadline.
func (s *Stream) take(want int) (int, error) {
	c := s.c
	c.mu.Lock()
	for {
		if err := s.writable(); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		if c.sendWin > 0 && s.sendWin > 0 {
			n := min(int64(want), c.sendWin, s.sendWin, int64(c.peerFrame.Load()))
			c.sendWin -= n
			s.sendWin -= n
			c.mu.Unlock()
			return int(n), nil
		}
		if c.sendWin <= 0 && !s.waiting {
			c.waiters = append(c.waiters, s)
			s.waiting = true
		}
		if s.due(true) {
			c.mu.Unlock()
			return 0, errWriteTimeout
		}
		s.arm(true)
		s.wwaiting = true
		c.mu.Unlock()
		s.Release()
		<-s.wwake
		c.mu.Lock()
		s.wwaiting = false
	}
}

// giveSendBack returns n bytes of send window taken for s's DATA that was
// not written after all: the backend never sees them, so it will never
// give them back. c.mu is held.
func (c *Conn) giveSendBack(s *Stream, n int64) {
	if n == 0 {
		return
	}
	c.sendWin += n
	s.sendWin += n
	c.wakeWaiters()
}

// wakeWaiters wakes the writers waiting for connection window. c.mu is
// held.
func (c *Conn) wakeWaiters() {
	for i, s := range c.waiters {
		s.waiting = false
		s.wakeWrite()
		c.waiters[i] = nil
	}
	c.waiters = c.waiters[:0]
}

// unwait takes s off the writers waiting for connection window. c.mu is
// held.
func (c *Conn) unwait(s *Stream) {
	for i, w := range c.waiters {
		if w == s {
			last := len(c.waiters) - 1
			c.waiters[i] = c.waiters[last]
			c.waiters[last] = nil
			c.waiters = c.waiters[:last]
			break
		}
	}
	s.waiting = false
}

// appendData adds body bytes to s's buffer, which never grows past the
// stream's window: the caller checked that the window covers them.
// c.mu is held.
func (s *Stream) appendData(p []byte, window int) {
	if len(s.buf)+len(p) > cap(s.buf) && s.off > 0 {
		n := copy(s.buf, s.buf[s.off:])
		s.buf, s.off = s.buf[:n], 0
	}
	if s.buf == nil {
		s.buf = s.c.getBuffer()
	}
	if need := len(s.buf) + len(p); need > cap(s.buf) {
		size := min(max(2*cap(s.buf), need, 1024), max(window, need))
		nb := make([]byte, len(s.buf), size)
		copy(nb, s.buf)
		s.buf = nb
	}
	s.buf = append(s.buf, p...)
}

// creditConn gives the connection's consumed window back once enough of
// it is. The reading goroutine only.
func (c *Conn) creditConn() {
	c.mu.Lock()
	n := c.unacked
	if n < c.connUpdateAt {
		c.mu.Unlock()
		return
	}
	c.unacked = 0
	c.recvWin += n
	c.mu.Unlock()
	c.writeCredit(0, n)
}

// freeBuffers is how many body buffers of closed streams a connection
// keeps for the next ones.
const freeBuffers = 16

// getBuffer returns a body buffer kept from a closed stream, or nil.
// c.mu is held.
func (c *Conn) getBuffer() []byte {
	n := len(c.free)
	if n == 0 {
		return nil
	}
	b := c.free[n-1]
	c.free[n-1] = nil
	c.free = c.free[:n-1]
	return b
}

// putBuffer keeps a closed stream's body buffer for the next stream, if
// there is room and it is not large. c.mu is held.
func (c *Conn) putBuffer(b []byte) {
	if cap(b) == 0 || cap(b) > 64<<10 || len(c.free) == freeBuffers {
		return
	}
	c.free = append(c.free, b[:0])
}
