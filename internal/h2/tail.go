package h2

import (
	"io"

	"relay/internal/core"
)

// A stream whose client grants too little flow-control window must not
// hold its backend connection, and the descriptor under it, while it
// waits: a client could open its hundred streams on each of many
// connections with a window of zero and take every descriptor relay has.
// So a response relay can hold whole is held, as nginx's proxy buffering
// holds it: what the window does not take at once becomes the stream's
// tail, written after the core has given the backend connection back.
// A body that came whole with the head is held so; one of known length
// up to readAheadBytes is read whole first when the window is short. What
// all of a connection's streams hold together is bounded by tailBytes;
// past that a stream waits for window on its backend connection, as a
// long body always does.
const (
	readAheadBytes = 64 << 10
	tailBytes      = 1 << 20
	// keepBufBytes is the largest buffer a recycled stream keeps.
	keepBufBytes = 16 << 10
)

// short reports whether st may not send want bytes now. mu is not held.
func (c *conn) short(st *stream, want int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return min(c.sendWin, st.sendWin) < want
}

// reserve takes n bytes of the connection's bound on held responses.
func (c *conn) reserve(st *stream, n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tails+int64(n) > tailBytes {
		return false
	}
	c.tails += int64(n)
	st.held += int64(n)
	return true
}

// keep makes p, the rest of a complete response, st's tail, ending the
// stream if end, and reports whether it could: p is copied unless it is
// already the stream's own (readAhead).
func (c *conn) keep(st *stream, p []byte, end bool) bool {
	if st.held == 0 {
		if !c.reserve(st, len(p)) {
			return false
		}
		st.buf = append(st.buf[:0], p...)
		p = st.buf
	}
	st.tail, st.tailEnd = p, end
	return true
}

// readAhead reads the whole body of length total, of which p came with
// the head, into the stream's own buffer and returns it. ok is false,
// with nothing read, when the connection's bound has no room for it.
func (st *stream) readAhead(p []byte, rb *core.ResponseBody, total int64) (body []byte, ok bool, err error) {
	if !st.c.reserve(st, int(total)) {
		return nil, false, nil
	}
	st.buf = append(st.buf[:0], p...)
	st.buf = append(st.buf, make([]byte, int(total)-len(p))...)
	_, err = io.ReadFull(rb, st.buf[len(p):])
	return st.buf, true, err
}

// writeTail writes the stream's tail, waiting for window, once the core
// is done with the request.
func (st *stream) writeTail() {
	if len(st.tail) > 0 {
		st.c.writeData(st, st.tail, st.tailEnd)
	}
	st.unhold()
}

// unhold gives back what the stream held of the connection's bound.
func (st *stream) unhold() {
	if st.held > 0 {
		c := st.c
		c.mu.Lock()
		c.tails -= st.held
		c.mu.Unlock()
		st.held = 0
	}
	st.tail, st.tailEnd = nil, false
	if cap(st.buf) > keepBufBytes {
		st.buf = nil
	}
}
