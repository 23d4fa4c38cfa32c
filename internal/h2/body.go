package h2

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"time"
)

// keepBodyBytes is the most a recycled stream keeps of its body buffer.
const keepBodyBytes = 64 << 10

// keepTrailerBytes is the most a recycled stream keeps of its trailers'
// buffer.
const keepTrailerBytes = 4 << 10

// reqBody is a stream's request body as the core reads it (core.Body):
// the bytes of the client's DATA frames, held until read. Reading gives
// the flow-control window back, and each wait for the client is bounded
// by the server's core.BodyTime, as on relay's HTTP/1.1 door: a backend
// slow to take the body does not count against the client.
type reqBody struct {
	st    *stream
	ready chan struct{} // a signal that bytes, the end or an error came

	// Under the connection's mu.
	buf     []byte
	off     int
	err     error // io.EOF once the client ended the stream
	aborted bool  // Abort was called and not Resume: a Read that would wait fails
	// answered says the response's head went out while the body was
	// still arriving (a streaming call): from then on only each wait for
	// the client is bounded, not the whole body, which lasts as long as
	// the call.
	answered atomic.Bool
	recvWin  int64 // what the client may still send on the stream
	unacked  int64 // read, not yet given back as stream window
	got      int64 // bytes received
	declared int64 // Content-Length; -1: none
	// trailers are the client's trailer fields as HTTP/1.1 lines, set
	// before the end (err io.EOF) and read after it.
	trailers []byte

	// The stream's goroutine only.
	start time.Time // when the request's head arrived
	read  int64
	done  bool
	timer *time.Timer
}

func (b *reqBody) reset() {
	if cap(b.buf) > keepBodyBytes {
		b.buf = nil
	}
	if cap(b.trailers) > keepTrailerBytes {
		b.trailers = nil
	}
	b.buf, b.off, b.err, b.aborted, b.trailers = b.buf[:0], 0, nil, false, b.trailers[:0]
	b.answered.Store(false)
	b.recvWin, b.unacked, b.got, b.declared = streamWindow, 0, 0, -1
	b.read, b.done = 0, false
	select {
	case <-b.ready:
	default:
	}
}

func (b *reqBody) signal() {
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// add holds data for the reader. mu is held. Bytes already read make
// room before the buffer grows, so it stays within the stream's window.
func (b *reqBody) add(data []byte) {
	if b.off > 0 && len(b.buf)+len(data) > cap(b.buf) {
		b.buf = b.buf[:copy(b.buf, b.buf[b.off:])]
		b.off = 0
	}
	b.buf = append(b.buf, data...)
	b.signal()
}

// end marks the end of the body. mu is held.
func (b *reqBody) end() error {
	if b.err == nil {
		b.err = io.EOF
	}
	b.signal()
	return nil
}

// drop ends the body with err, discarding what is unread, and returns
// how many bytes that was. mu is held.
func (b *reqBody) drop(err error) int {
	n := len(b.buf) - b.off
	b.buf, b.off = b.buf[:0], 0
	if b.err == nil || b.err == io.EOF {
		b.err = err
	}
	b.signal()
	return n
}

// Read reads body bytes as they arrive; io.EOF at the end.
func (b *reqBody) Read(p []byte) (int, error) {
	c := b.st.c
	bt := &c.srv.body
	waited := false
	for {
		c.mu.Lock()
		if n := len(b.buf) - b.off; n > 0 {
			k := copy(p, b.buf[b.off:])
			b.off += k
			if b.off == len(b.buf) {
				b.buf, b.off = b.buf[:0], 0
			}
			b.read += int64(k)
			c.unacked += int64(k)
			if !b.st.remoteDone {
				b.unacked += int64(k)
			}
			conn, strm := c.creditDue(b)
			c.mu.Unlock()
			c.writeCredit(b.st.id, conn, strm)
			return k, nil
		}
		if err := b.err; err != nil {
			c.mu.Unlock()
			if err == io.EOF {
				b.done = true
			}
			return 0, err
		}
		if b.aborted {
			c.mu.Unlock()
			return 0, errAborted
		}
		c.mu.Unlock()
		if bt.Idle <= 0 {
			<-b.ready
			continue
		}
		if !waited {
			waited = true
			now := time.Now()
			wait := time.Until(bt.Deadline(now, b.start, b.read))
			if b.answered.Load() {
				wait = bt.Idle
			}
			if b.timer == nil {
				b.timer = time.NewTimer(wait)
			} else {
				b.timer.Reset(wait)
			}
		}
		select {
		case <-b.ready:
		case <-b.timer.C:
			return 0, os.ErrDeadlineExceeded
		}
	}
}

// stop ends the body's timer: the request is over.
func (b *reqBody) stop() {
	if b.timer != nil {
		b.timer.Stop()
	}
}

func (b *reqBody) Prefix() []byte   { return nil }
func (b *reqBody) Done() bool       { return b.done }
func (b *reqBody) Trailers() []byte { return b.trailers }

// creditDue takes the window to give back now: the connection's, and
// b's stream's (b may be nil), each once windowUpdateAt bytes of it are
// due. mu is held.
func (c *conn) creditDue(b *reqBody) (conn, strm int64) {
	if c.unacked >= windowUpdateAt {
		conn, c.unacked = c.unacked, 0
		c.recvWin += conn
	}
	if b != nil && b.unacked >= windowUpdateAt {
		strm, b.unacked = b.unacked, 0
		b.recvWin += strm
	}
	return conn, strm
}

// giveBack sends the connection window that is due, after bytes that no
// stream reads, and the window of a DATA frame's padding.
func (c *conn) giveBack() {
	c.mu.Lock()
	conn, _ := c.creditDue(nil)
	id, pad := c.padID, c.padN
	c.padID, c.padN = 0, 0
	c.mu.Unlock()
	if pad > 0 {
		// A stream's window only while it is open: no frame may follow
		// relay's RST_STREAM, which is written under the write lock
		// after the stream has left c.streams.
		c.lockWrite()
		c.mu.Lock()
		st := c.streams[id]
		open := st != nil && !st.remoteDone
		c.mu.Unlock()
		if !open {
			pad = 0
		}
		if conn > 0 {
			c.wfr.WriteWindowUpdate(0, uint32(conn))
		}
		if pad > 0 {
			c.wfr.WriteWindowUpdate(id, uint32(pad))
		}
		c.unlockWrite()
		return
	}
	c.writeCredit(0, conn, 0)
}

// errAborted ends a Read the core no longer waits for: the backend
// answered, or refused the stream, while the client was still sending.
var errAborted = errors.New("request body no longer read: the attempt is over")

// Abort ends a Read waiting for the client, and those after that would
// wait: the core sends a body to an HTTP/2 backend while it relays the
// response, and stops once that is over. What the client sends later is
// discarded as the stream ends, unless Resume is called.
func (b *reqBody) Abort() {
	c := b.st.c
	c.mu.Lock()
	b.aborted = true
	b.signal()
	c.mu.Unlock()
}

// Resume undoes Abort: the core reads the rest of the body after all, for
// another attempt at a backend. Nothing the client sent meanwhile was
// lost, nor its end.
func (b *reqBody) Resume() {
	c := b.st.c
	c.mu.Lock()
	b.aborted = false
	c.mu.Unlock()
}

// Complete reports whether the client has sent the whole body and it is
// all held here, so reading it to its end will not wait: a unary gRPC
// call's message comes with its head, and the core sends it to an HTTP/2
// backend in the same write as the head.
func (b *reqBody) Complete() bool {
	c := b.st.c
	c.mu.Lock()
	done := b.err == io.EOF
	c.mu.Unlock()
	return done
}
