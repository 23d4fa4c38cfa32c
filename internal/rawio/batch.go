package rawio

import (
	"net"
	"os"
	"runtime"
	"sync"
	"time"
)

// batchLimit is how many bytes a BatchConn holds before its writers wait
// for the connection: the client's HTTP/2 flow-control window may be far
// larger, and a client that stops reading must not make relay buffer what
// the backends send it.
const batchLimit = 256 << 10

// batchKeep is the largest buffer a BatchConn keeps for its next batch.
// Once everything is written its buffers go back to batchBufs: a busy
// connection does not grow a new buffer for every batch, and an idle one
// holds none.
const batchKeep = 32 << 10

// batchBuf is a batch's buffer, as batchBufs holds it.
type batchBuf struct{ b []byte }

var batchBufs = sync.Pool{New: func() any { return &batchBuf{b: make([]byte, 0, 4<<10)} }}

// putBatchBuf gives b back to batchBufs, unless it grew past batchKeep.
func putBatchBuf(b *batchBuf) {
	if b != nil && cap(b.b) <= batchKeep {
		b.b = b.b[:0]
		batchBufs.Put(b)
	}
}

// closeWait bounds how long Close waits for pending bytes to go out to a
// client that does not take them, as crypto/tls bounds its close_notify.
const closeWait = 5 * time.Second

// BatchConn gathers the writes made close together on a connection into
// one write, once Batch has been called. On an HTTP/2 connection each
// stream writes its own response when its backend answers; written
// straight through, every response would be a system call of its own.
// Batched, a Write only appends to a buffer and starts a goroutine that
// writes the buffer out; that goroutine runs once the goroutines already
// runnable have run, so whatever they write meanwhile (other streams'
// responses) goes out in the same system call.
// With one scheduler thread the responses an epoll wake-up makes ready
// thus leave together, as an event loop's would.
//
// Under TLS a BatchConn sits below crypto/tls, so records keep their
// boundaries and the HTTP/2 server still sees a *tls.Conn. Writes stay in
// order; a failed write fails every later Write. Writers wait while
// batchLimit bytes are pending, so memory stays bounded whatever the
// client does.
//
// Once batching, write deadlines set by callers are kept by the BatchConn
// and not passed to the connection underneath: set there they would cut
// short, or clear, the deadline of a write the drain has under way. They
// time what a Write does: a Write after its deadline fails, and so does
// one whose wait for room outlasts it (crypto/tls bounds its close_notify
// so). What bounds a client that stops taking bytes is the connection's
// own deadline (rawio.Conn's WriteWait): it fails the drain's write, and
// with it every waiting and later Write, and the drain closes the
// connection, so that its reader ends too. Close waits for the pending
// bytes up to closeWait and then closes the connection anyway.
//
// Writers are expected to take turns (crypto/tls holds a lock around each
// Write); concurrent ones waiting for room are not served in order.
type BatchConn struct {
	net.Conn

	mu       sync.Mutex
	drained  sync.Cond // signalled when a write to Conn finishes, and by Close
	batching bool
	pending  *batchBuf // written by callers, not yet by the drain; nil: none
	spare    *batchBuf // the drain's last buffer, for reuse
	draining bool      // a drain goroutine is running
	closed   bool      // Close was called: no more writes
	err      error     // the first write error; every later Write returns it
	deadline time.Time // the callers' write deadline, once batching
	// expired says the deadline has passed; timer sets it then, so
	// that a Write reads no clock.
	expired bool
	timer   *time.Timer
	drainFn func() // c.drain, bound once
}

// NewBatchConn wraps c; it writes straight through until Batch.
func NewBatchConn(c net.Conn) *BatchConn {
	b := &BatchConn{Conn: c}
	b.drained.L = &b.mu
	b.drainFn = b.drain
	return b
}

// Batch starts gathering writes. Call it before handing the connection to
// the goroutines that write to it.
func (c *BatchConn) Batch() { c.batching = true }

// NetConn returns the connection underneath, as crypto/tls's does, so
// Quiet and PeerGone can find the socket.
func (c *BatchConn) NetConn() net.Conn { return c.Conn }

// SetDeadline sets the read and write deadlines; once batching, the
// write deadline is the BatchConn's own (see BatchConn).
func (c *BatchConn) SetDeadline(t time.Time) error {
	if c.batching {
		c.setWriteDeadline(t)
		return c.Conn.SetReadDeadline(t)
	}
	return c.Conn.SetDeadline(t)
}

// SetWriteDeadline sets the write deadline; once batching, it is the
// BatchConn's own (see BatchConn).
func (c *BatchConn) SetWriteDeadline(t time.Time) error {
	if c.batching {
		c.setWriteDeadline(t)
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *BatchConn) setWriteDeadline(t time.Time) {
	c.mu.Lock()
	c.deadline, c.expired = t, false
	if c.timer != nil {
		c.timer.Stop()
	}
	if !t.IsZero() {
		switch d := time.Until(t); {
		case d <= 0:
			c.expired = true
		case c.timer == nil:
			c.timer = time.AfterFunc(d, c.expire)
		default:
			c.timer.Reset(d)
		}
	}
	c.drained.Broadcast() // a writer waiting for room looks again
	c.mu.Unlock()
}

// expire notes that the deadline passed, and wakes the writers waiting
// for room. A timer stopped too late to keep it from running finds a
// later deadline, and does nothing.
func (c *BatchConn) expire() {
	c.mu.Lock()
	if !c.deadline.IsZero() && time.Until(c.deadline) <= 0 {
		c.expired = true
		c.drained.Broadcast()
	}
	c.mu.Unlock()
}

// Write appends p to the batch and returns at once, or, before Batch,
// writes it. It waits while batchLimit bytes are pending.
func (c *BatchConn) Write(p []byte) (int, error) {
	if !c.batching {
		return c.Conn.Write(p)
	}
	c.mu.Lock()
	for c.failure() == nil && c.pendingBytes() >= batchLimit {
		c.drained.Wait()
	}
	if err := c.failure(); err != nil {
		c.mu.Unlock()
		return 0, err
	}
	if c.pending == nil {
		c.pending = batchBufs.Get().(*batchBuf)
	}
	c.pending.b = append(c.pending.b, p...)
	if !c.draining {
		c.draining = true
		go c.drainFn()
	}
	c.mu.Unlock()
	return len(p), nil
}

// pendingBytes is how many bytes wait for the drain; c.mu is held.
func (c *BatchConn) pendingBytes() int {
	if c.pending == nil {
		return 0
	}
	return len(c.pending.b)
}

// failure is why a Write cannot be taken, if it cannot; c.mu is held.
func (c *BatchConn) failure() error {
	switch {
	case c.err != nil:
		return c.err
	case c.closed:
		return net.ErrClosed
	case c.expired:
		return os.ErrDeadlineExceeded
	}
	return nil
}

// drain writes the pending bytes until none are left or a write fails.
func (c *BatchConn) drain() {
	// A new goroutine runs next, before those already runnable: step
	// behind them, so that what they write joins this batch.
	runtime.Gosched()
	c.mu.Lock()
	failed := false
	for c.pendingBytes() > 0 && c.err == nil {
		buf := c.pending
		c.pending, c.spare = c.spare, nil
		c.mu.Unlock()
		_, err := c.Conn.Write(buf.b)
		c.mu.Lock()
		if cap(buf.b) <= batchKeep {
			buf.b = buf.b[:0]
			c.spare = buf
		}
		if err != nil {
			c.err, failed = err, true
		}
		c.drained.Broadcast()
	}
	// What is pending after a failure is lost with the connection.
	putBatchBuf(c.pending)
	putBatchBuf(c.spare)
	c.pending, c.spare = nil, nil
	c.draining = false
	c.drained.Broadcast()
	c.mu.Unlock()
	if failed {
		// Bytes were lost: the connection is done. Closed, it fails
		// its reader too, which otherwise would wait on a peer that
		// takes nothing, and a writer with nothing more to send would
		// never hear of it.
		c.Conn.Close()
	}
}

// Close takes no more writes, waits up to closeWait for the pending bytes
// to be written (what a server writes last before closing, a GOAWAY or a
// close_notify, must still reach the client), and closes the connection,
// which also ends a write the client has stalled.
func (c *BatchConn) Close() error {
	c.mu.Lock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.drained.Broadcast() // writers waiting for room give up
	if c.draining {
		t := time.AfterFunc(closeWait, func() { c.Conn.Close() })
		for c.draining {
			c.drained.Wait()
		}
		t.Stop()
	}
	lost := c.err // bytes the client never got
	c.mu.Unlock()
	// After a failed drain the connection is closed already.
	if err := c.Conn.Close(); lost == nil {
		return err
	}
	return lost
}
