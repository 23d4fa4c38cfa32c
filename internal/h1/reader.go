package h1

import (
	"bytes"
	"io"
	"sync"

	"relay/internal/rawio"
)

// Reader buffers one direction of a connection. It reads whole message heads
// into its buffer (growing it up to a limit) and serves body bytes from the
// buffer before reading the connection again, so pipelined messages and bytes
// that arrived with a head are never lost.
type Reader struct {
	rd      io.Reader
	buf     []byte
	r, w    int // buf[r:w] holds unread bytes
	max     int // largest head accepted
	scanned int // bytes of buf[r:w] already searched for the end of a head

	// With a pool, the buffer goes back to it whenever it is empty and
	// the socket has nothing to read (see fillIdle).
	pool *BufferPool
	bufp *[]byte     // the pool's handle of buf, when buf came from the pool
	sock *rawio.Conn // rd, when it is a raw socket that can read into a lent buffer
}

// NewReader returns a Reader over rd with an initial buffer of size bytes
// that accepts heads of up to max bytes.
func NewReader(rd io.Reader, size, max int) *Reader {
	if size < 1 {
		size = 1 // an empty buffer could never grow by doubling
	}
	if max < size {
		max = size
	}
	return &Reader{rd: rd, buf: make([]byte, size), max: max}
}

// NewPooledReader returns a Reader over rd whose buffer comes from pool and
// goes back to it whenever the buffer is empty and rd has nothing to read,
// so an idle keep-alive connection holds no buffer at all. The buffer grows
// beyond the pool's size, up to max, for a large head. When rd is a raw
// socket (a *rawio.Conn over one) the buffer goes back by itself while rd
// has nothing to read; otherwise the caller gives it back with Release.
func NewPooledReader(rd io.Reader, pool *BufferPool, maxHead int) *Reader {
	r := &Reader{rd: rd, max: max(maxHead, pool.size), pool: pool}
	if c, ok := rd.(*rawio.Conn); ok && c.Raw() {
		r.sock = c
	}
	return r
}

// Reset points the Reader at a new connection and discards buffered bytes,
// keeping the buffer for reuse.
func (r *Reader) Reset(rd io.Reader) {
	r.rd = rd
	r.r, r.w, r.scanned = 0, 0, 0
}

// Buffered returns the number of unread bytes held in the buffer.
func (r *Reader) Buffered() int { return r.w - r.r }

// Peek returns the unread buffered bytes without consuming them.
func (r *Reader) Peek() []byte { return r.buf[r.r:r.w] }

// Discard consumes n buffered bytes; n must not exceed Buffered.
func (r *Reader) Discard(n int) {
	r.r += n
	r.scanned = 0
	if r.r == r.w {
		r.r, r.w = 0, 0
	}
}

// HoldsBuffer reports whether the Reader holds a read buffer now. A pooled
// Reader over a socket holds none while its connection waits idle.
func (r *Reader) HoldsBuffer() bool { return r.buf != nil }

// Underlying returns the reader the buffer fills from.
func (r *Reader) Underlying() io.Reader { return r.rd }

// Read reads buffered bytes first; with an empty buffer, large reads go to the
// underlying reader directly and small ones refill the buffer.
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if r.r == r.w {
		if len(p) >= len(r.buf) {
			return r.rd.Read(p)
		}
		if err := r.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.buf[r.r:r.w])
	r.Discard(n)
	return n, nil
}

// Fill waits for at least one more byte and reads what has arrived into the
// buffer. A server uses it to tell the wait for a next request, bounded by
// its idle timeout, from the reading of that request's head, bounded by its
// header timeout.
func (r *Reader) Fill() error { return r.fill() }

// HeadBuffered reports whether the buffer holds a complete message head, so
// reading it will not wait for the connection.
func (r *Reader) HeadBuffered() bool { return r.w > r.r && r.headEnd() > 0 }

// fill reads at least one more byte into the buffer, compacting it first.
func (r *Reader) fill() error {
	if r.sock != nil && r.r == r.w {
		return r.fillIdle()
	}
	if r.buf == nil {
		r.take()
	}
	if r.r > 0 {
		copy(r.buf, r.buf[r.r:r.w])
		r.w -= r.r
		r.r = 0
	}
	if r.w == len(r.buf) {
		if len(r.buf) >= r.max {
			return ErrHeadTooLarge
		}
		size := 2 * len(r.buf)
		if size > r.max {
			size = r.max
		}
		nb := make([]byte, size)
		copy(nb, r.buf[:r.w])
		r.buf = nb
	}
	for i := 0; i < 100; i++ {
		n, err := r.rd.Read(r.buf[r.w:])
		r.w += n
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// readLine returns the next line without its CRLF, consuming it. It is used
// for chunk sizes and trailers, which must fit in the buffer.
func (r *Reader) readLine() ([]byte, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.r:r.w], '\n'); i >= 0 {
			line := r.buf[r.r : r.r+i+1]
			r.r += i + 1
			if len(line) < 2 || line[len(line)-2] != '\r' {
				return nil, ErrBareLF
			}
			return line[:len(line)-2], nil
		}
		if err := r.fill(); err != nil {
			if err == io.EOF {
				err = ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// readHead returns a complete message head, from its first line to the empty
// line that ends it (inclusive), and consumes it. Empty lines before the
// first line are skipped, as RFC 9112 section 2.2 allows. The returned slice
// aliases the buffer and is valid until the next read of any kind, body
// reads included.
//
// io.EOF means the connection closed cleanly between messages.
func (r *Reader) readHead() ([]byte, error) {
	for {
		for r.w-r.r >= 2 && r.buf[r.r] == '\r' && r.buf[r.r+1] == '\n' {
			r.r += 2
			r.scanned = 0
		}
		if end := r.headEnd(); end > 0 {
			head := r.buf[r.r : r.r+end]
			r.r += end
			r.scanned = 0
			if r.r == r.w {
				r.r, r.w = 0, 0
			}
			return head, nil
		}
		had := r.w - r.r
		if err := r.fill(); err != nil {
			if err == io.EOF && had > 0 {
				return nil, ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// headEnd finds the end of a head in the unread bytes: the offset just past
// the LF of the blank line, or 0 when the head is incomplete. A blank line
// is LF followed by either CRLF or a bare LF; the parser rejects bare LFs
// afterwards, but finding them here lets a bad head fail fast instead of
// waiting for a CRLFCRLF that never comes.
func (r *Reader) headEnd() int {
	b := r.buf[r.r:r.w]
	from := r.scanned
	if from > 0 {
		from-- // a blank line may straddle the previous scan
	}
	for {
		i := bytes.IndexByte(b[from:], '\n')
		if i < 0 {
			if len(b) > 2 {
				r.scanned = len(b) - 2
			}
			return 0
		}
		i += from
		switch {
		case i+1 < len(b) && b[i+1] == '\n':
			r.scanned = i + 1 // a second call finds this end at once
			return i + 2
		case i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n':
			r.scanned = i + 1
			return i + 3
		case i+2 >= len(b):
			r.scanned = i
			return 0
		}
		from = i + 1
	}
}

// BufferPool holds read buffers of one size for pooled Readers.
type BufferPool struct {
	size int
	free sync.Pool
}

// NewBufferPool returns a pool of size-byte buffers.
func NewBufferPool(size int) *BufferPool {
	return &BufferPool{size: max(size, 1)}
}

func (p *BufferPool) get() *[]byte {
	if b, ok := p.free.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, p.size)
	return &b
}

func (p *BufferPool) put(b *[]byte) { p.free.Put(b) }

// Release gives the buffer back to the pool when it holds no unread bytes,
// for a connection that is about to sit idle; the next read takes one
// again. A buffer that grew past the pool's size is left to the garbage
// collector. Release does nothing for a Reader without a pool.
func (r *Reader) Release() {
	if r.pool == nil || r.r != r.w || r.buf == nil {
		return
	}
	if r.bufp != nil && len(r.buf) == r.pool.size {
		r.pool.put(r.bufp)
	}
	r.buf, r.bufp = nil, nil
	r.r, r.w, r.scanned = 0, 0, 0
}

// Drop gives the buffer back to the pool even with unread bytes in it, for
// a connection that is closing: they will never be read. A client that
// closes a kept-alive connection would otherwise take its buffer with it,
// and every new connection would need a fresh one.
func (r *Reader) Drop() {
	r.r = r.w
	r.Release()
}

// take gives the Reader a buffer from its pool.
func (r *Reader) take() {
	r.bufp = r.pool.get()
	r.buf = *r.bufp
}

// fillIdle reads into an empty buffer through the raw socket, which gives
// the buffer back to the pool while it waits for bytes (rawio.Conn.ReadLent).
func (r *Reader) fillIdle() error {
	r.r, r.w, r.scanned = 0, 0, 0
	n, err := r.sock.ReadLent((*lender)(r))
	r.w = n
	return err
}

// lender is the Reader as the socket sees it while it waits: a buffer to
// borrow and give back. A conversion, so reading allocates nothing.
type lender Reader

func (l *lender) Borrow() []byte {
	r := (*Reader)(l)
	if r.buf == nil {
		r.take()
	}
	return r.buf
}

func (l *lender) GiveBack() { (*Reader)(l).Release() }
