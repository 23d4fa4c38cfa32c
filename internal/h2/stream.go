package h2

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
	"relay/internal/h1"
)

// stream is one request and its response. The connection's goroutine
// opens it and feeds its body; its own goroutine forwards it through the
// core and writes the response (door.go).
type stream struct {
	c    *conn
	id   uint32
	x    core.Exchange
	req  h1.Request
	peer core.Peer
	// cookie holds the cookie fields joined.
	cookie []byte
	head   bool // a HEAD request: the response has no body
	// headerBytes is the fields' header list size, counted in the
	// connection's fb.held while the stream is open.
	headerBytes int64
	// refuse is relay's own answer, sent instead of forwarding
	// (a request relay will not serve: 431, 400).
	refuse     int
	refuseText string
	// dw writes the response body (Respond), kept here so that handing
	// it to the copy allocates nothing.
	dw dataWriter

	gone atomic.Bool // reset, or the connection ended

	// Under c.mu.
	body          reqBody
	sendWin       int64 // what relay may still send on the stream
	remoteDone    bool  // the client ended its side (END_STREAM)
	closed        bool  // removed from the connection's streams
	resetByClient bool
	waitingSince  time.Time // waiting for window since
	stalled       bool      // waited for window for IdleTimeout

	// The stream's goroutine only.
	// tail is the rest of a complete response, written once the core has
	// let go of its backend connection (tail.go); buf holds it, and held
	// is what the stream holds of the connection's bound on such bytes.
	tail     []byte
	tailEnd  bool
	buf      []byte
	held     int64
	answered bool // the response's HEADERS went out
	ended    bool // END_STREAM went out
	sent100  bool

	// hops are the names the response head's Connection fields list,
	// copied for its trailers (endWithTrailers).
	hops []byte
}

// streams recycles streams and, with them, the core's per-request buffers.
var streams = sync.Pool{New: func() any {
	st := new(stream)
	st.body.st = st
	st.body.ready = make(chan struct{}, 1)
	return st
}}

// onHeaders opens a stream, or takes a trailer section that ends one.
func (c *conn) onHeaders(f *http2.MetaHeadersFrame) error {
	id := f.StreamID
	if id%2 == 0 {
		return http2.ConnectionError(http2.ErrCodeProtocol) // clients open odd streams
	}
	// Asked before the connection's lock: with the budget spent, Short
	// closes an idle upstream connection, which takes the core's locks.
	// Only for a stream that would open: maxID changes on this goroutine
	// alone, so it may be read here without the lock.
	short := id > c.maxID && c.srv.core.Descriptors().Short()
	c.mu.Lock()
	if st := c.streams[id]; st != nil {
		defer c.mu.Unlock()
		if st.remoteDone {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
		}
		if !f.StreamEnded() {
			// A trailer section must end the stream (RFC 9113 8.1).
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
		}
		if code := checkTrailers(f.Fields); code != http2.ErrCodeNo {
			return http2.StreamError{StreamID: id, Code: code}
		}
		b := &st.body
		if b.declared >= 0 && b.got != b.declared {
			return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
		}
		if st.req.Chunked {
			// The body goes to the backend chunked: the trailers
			// follow its last chunk. One of known length has nowhere
			// to carry them, and they stay behind.
			size := int64(listSize(f.Fields))
			if f.Truncated || size > int64(c.srv.lim.MaxHeaderBytes) {
				// Too large to pass on whole: the backend must not
				// take the body for complete without them.
				return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
			}
			if c.fb.held+size > c.fb.heldLimit {
				// Kept until the stream ends, they count against the
				// header lists one connection may hold (budget.go),
				// which they must not take past its bound. A stream
				// alone always fits: its head and trailers are each
				// within MaxHeaderBytes. Not REFUSED_STREAM: part of
				// the request has gone to the backend.
				return http2.StreamError{StreamID: id, Code: http2.ErrCodeEnhanceYourCalm}
			}
			b.trailers = appendTrailers(b.trailers[:0], f.Fields)
			st.headerBytes += size
			c.fb.held += size
		}
		st.remoteDone = true
		return b.end()
	}
	if id <= c.maxID {
		reset := c.wasReset(id)
		c.mu.Unlock()
		if reset {
			// relay reset the stream; what the client sent before it
			// knew is ignored (RFC 9113 5.1).
			c.spend()
			return nil
		}
		return http2.ConnectionError(http2.ErrCodeProtocol) // streams only go up
	}
	c.maxID = id
	c.ab.opened++
	if f.HasPriority() && f.Priority.StreamDep == id {
		c.mu.Unlock()
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	if len(c.streams) >= c.srv.lim.MaxConcurrentStreams {
		c.mu.Unlock()
		// REFUSED_STREAM tells the client nothing was done, so it may
		// try again: it may not know the limit yet, or have seen the
		// end of a stream relay has not quite closed.
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeRefusedStream}
	}
	if short {
		// relay has no descriptor for a backend connection now (package
		// fds): the client may try again (refuseForRelay).
		c.refuseForRelay(id)
		return nil
	}
	size := int64(listSize(f.Fields))
	if !c.fb.holdFields(size) {
		// Other streams hold the header lists relay keeps for one
		// connection: this one may come again once they end
		// (refuseForRelay).
		c.refuseForRelay(id)
		return nil
	}
	if running := c.running; running >= runningPerStream*c.srv.lim.MaxConcurrentStreams {
		c.mu.Unlock()
		return calm(c.cutOff("HTTP/2 client keeps too many cancelled streams running (Rapid Reset); connection closed",
			"running", running))
	}
	c.mu.Unlock()

	st := streams.Get().(*stream)
	st.open(c, id)
	if code := st.view(f, size); code != http2.ErrCodeNo {
		st.release()
		return http2.StreamError{StreamID: id, Code: code}
	}

	c.mu.Lock()
	c.streams[id] = st
	st.headerBytes = size
	c.fb.held += size
	c.running++
	st.sendWin = c.peerWin
	st.remoteDone = f.StreamEnded()
	if st.remoteDone {
		st.body.end()
	}
	c.mu.Unlock()
	c.start(st)
	return nil
}

// refuseForRelay refuses stream id with REFUSED_STREAM for a bound of
// relay's own that the client cannot know (descriptors, the header lists
// a connection may hold; its request is within what relay advertises):
// not a wasted stream under the Rapid Reset rule, nor an opened one that
// earns control frames. It costs one frame of the control budget, which
// bounds a client that sends such streams without end (abuse.go). mu is
// held, and released.
func (c *conn) refuseForRelay(id uint32) {
	c.ab.opened--
	c.noteReset(id)
	c.mu.Unlock()
	c.spend()
	c.writeReset(id, http2.ErrCodeRefusedStream)
}

// onData takes a stream's body bytes.
func (c *conn) onData(f *http2.DataFrame) error {
	id := f.StreamID
	n := int64(f.Length) // padding included: it counts against the windows
	c.mu.Lock()
	defer c.mu.Unlock()
	if n > c.recvWin {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.recvWin -= n
	st := c.streams[id]
	if st == nil || st.remoteDone {
		c.spend()      // a frame that asks nothing of relay (abuse.go)
		c.unacked += n // not for anyone: the connection's window comes back
		switch {
		case st == nil && id > c.maxID:
			return http2.ConnectionError(http2.ErrCodeProtocol) // idle stream
		case st == nil && c.wasReset(id):
			return nil // sent before the client knew of relay's reset
		}
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeStreamClosed}
	}
	b := &st.body
	if n > b.recvWin {
		c.unacked += n
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeFlowControl}
	}
	b.recvWin -= n
	data := f.Data()
	if len(data) == 0 && !f.StreamEnded() {
		c.spend() // an empty frame (abuse.go)
	}
	b.got += int64(len(data))
	if b.declared >= 0 && (b.got > b.declared || f.StreamEnded() && b.got != b.declared) {
		// A body that is not the length declared is malformed (RFC
		// 9113 8.1.1).
		c.unacked += n
		return http2.StreamError{StreamID: id, Code: http2.ErrCodeProtocol}
	}
	if pad := n - int64(len(data)); pad > 0 {
		// Padding is never read: its window comes back at once.
		c.unacked += pad
		b.recvWin += pad
		c.padID, c.padN = id, pad
	}
	b.add(data)
	if f.StreamEnded() {
		st.remoteDone = true
		b.end()
	}
	return nil
}

// discard takes a DATA frame no stream will read.
func (c *conn) discard(f *http2.DataFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := int64(f.Length)
	if n > c.recvWin {
		return http2.ConnectionError(http2.ErrCodeFlowControl)
	}
	c.recvWin -= n
	c.unacked += n
	c.spend() // a frame that asks nothing of relay (abuse.go)
	return nil
}

// open readies a recycled stream for request id on c.
func (st *stream) open(c *conn, id uint32) {
	st.c, st.id = c, id
	st.peer = c.peer
	st.gone.Store(false)
	st.body.reset()
	st.sendWin, st.remoteDone, st.closed, st.resetByClient, st.answered = 0, false, false, false, false
	st.waitingSince, st.stalled = time.Time{}, false
	st.ended, st.sent100, st.head = false, false, false
	st.refuse, st.refuseText = 0, ""
}

// release recycles st once nothing refers to it.
func (st *stream) release() {
	st.x.Req, st.x.Body, st.x.Door, st.x.Peer = nil, nil, nil, nil
	st.req.Fields = st.req.Fields[:0]
	if cap(st.hops) > keepTrailerBytes {
		st.hops = nil
	}
	st.hops = st.hops[:0]
	st.c = nil
	streams.Put(st)
}

// run forwards the request through the core and ends the stream.
func (st *stream) run() {
	c := st.c
	switch {
	case st.gone.Load():
		// The client cancelled the stream before relay started on it:
		// nothing to forward, nobody to answer (nginx's 499).
		c.srv.core.LogRejected(&st.peer, 499)
	case st.refuse != 0:
		st.Error(st.refuse, st.refuseText)
		c.srv.core.LogRejected(&st.peer, st.refuse)
	default:
		st.x.Req, st.x.Door, st.x.Peer, st.x.Proto = &st.req, st, &st.peer, "HTTP/2.0"
		st.x.Body = nil
		if st.req.HasBody() {
			st.body.start = time.Now()
			st.x.Body = &st.body
		}
		c.srv.core.Forward(&st.x)
	}
	st.writeTail()
	st.finish()
}

// finish ends the stream once its goroutine is done with it: a response
// cut short is reset (the client must see it broken, not complete), and
// a request body still coming is refused with RST_STREAM NO_ERROR (RFC
// 9113 8.1), as the answer is complete.
func (st *stream) finish() {
	c := st.c
	st.body.stop()
	c.mu.Lock()
	reset := http2.ErrCodeNo
	send := false
	if !st.closed {
		switch {
		case !st.ended:
			reset, send = http2.ErrCodeInternal, true
		case !st.remoteDone:
			reset, send = http2.ErrCodeNo, true
		}
		if send {
			c.noteReset(st.id)
		}
		c.endStream(st, errStreamClosed)
	}
	if st.resetByClient && !st.answered || st.refuse != 0 {
		// Cancelled before an answer, or refused by relay itself: a
		// wasted stream (abuse.go).
		c.ab.wasted++
	}
	abusive := c.wastedTooMuch()
	opened, wasted := c.ab.opened, c.ab.wasted
	c.running--
	c.fb.held -= st.headerBytes
	last := c.goingAway && c.running == 0 && len(c.streams) == 0
	credit, _ := c.creditDue(nil)
	c.window.Broadcast()
	c.mu.Unlock()
	if send {
		c.writeReset(st.id, reset)
	}
	c.writeCredit(0, credit, 0)
	st.release()
	switch {
	case abusive:
		if c.cutForWaste(opened, wasted) {
			c.calmFromStream()
		}
	case last:
		c.closeSoon()
	}
}

// growStack makes a runner's goroutine grow its stack here, near the top
// of a short stack, instead of deep in the core, where growing copies
// twice the frames.
//
//go:noinline
func growStack(i int) byte {
	var pad [6144]byte
	pad[i] = 1
	return pad[i/2]
}
