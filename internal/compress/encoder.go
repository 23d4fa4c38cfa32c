package compress

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Windows bound what one stream holds. A body of a few hundred
// kilobytes compresses within a few percent as densely with these as
// with the libraries' defaults (4 MiB and more), which would each cost
// megabytes per concurrent response.
const (
	// BrotliWindowLog is brotli's window, 2^18 = 256 KiB.
	BrotliWindowLog = 18
	// ZstdWindow is zstd's window, 256 KiB.
	ZstdWindow = 256 << 10
	// MaxPooledOutput is the largest output buffer an encoder keeps
	// when it goes back to its pool; a larger one (a caller that drained
	// late) is dropped, so idle encoders hold bounded memory.
	MaxPooledOutput = 64 << 10
)

// stream is what the three libraries' writers have in common.
type stream interface {
	io.Writer
	Flush() error
	Close() error
	Reset(io.Writer)
}

// Encoder compresses one response body. Bytes written to it come out
// compressed in Output, which the caller sends and marks sent with
// Consume; Flush pushes out everything written so far, Close ends the
// stream. The caller drains Output after each call, so the output buffer
// holds what one call produced: at worst about the bytes given plus
// those the coder held back from earlier calls (a block). An Encoder is not safe for concurrent use; a
// response's forwarding goroutine owns it from Policy.Encoder to
// Release.
type Encoder struct {
	coding   Encoding
	pool     *sync.Pool
	s        stream
	out      sink
	closed   bool
	released bool
	// cost is what the encoder counts for in a budget (encoderCost),
	// and budget the one it was taken from, nil once it is released.
	cost   int64
	budget *budget
}

// sink is the compressor's destination: Output's buffer, of which the
// first start bytes have been consumed.
type sink struct {
	buf   []byte
	start int
}

func (s *sink) Write(p []byte) (int, error) {
	if s.start > 0 && len(s.buf)+len(p) > cap(s.buf) {
		// Reclaim the sent prefix before growing the buffer.
		n := copy(s.buf, s.buf[s.start:])
		s.buf, s.start = s.buf[:n], 0
	}
	s.buf = append(s.buf, p...)
	return len(p), nil
}

var errClosed = errors.New("compress: the encoder's stream is closed")

// Encoder takes an encoder for coding e from p's pool, ready for a new
// body; nil for Identity, for a coding p does not produce, and when the
// encoders in use hold the process's memory for them (SetEncoderMemory):
// the caller then sends the body as it is. In steady state it allocates
// nothing: pooled encoders keep their windows and tables (the package
// documentation has the one allocation zstd makes).
func (p *Policy) Encoder(e Encoding) *Encoder {
	if int(e) >= len(p.pools) || p.pools[e] == nil {
		return nil
	}
	if !p.budget.take(p.costs[e]) {
		return nil
	}
	enc := p.pools[e].Get().(*Encoder)
	enc.reset()
	enc.cost, enc.budget = p.costs[e], p.budget
	return enc
}

// reset starts a new stream.
func (e *Encoder) reset() {
	e.s.Reset(&e.out)
	e.out.buf, e.out.start = e.out.buf[:0], 0
	e.closed, e.released = false, false
}

// Coding returns the coding e produces, for Content-Encoding.
func (e *Encoder) Coding() Encoding { return e.coding }

// Write compresses p; what comes out of it so far is in Output. The
// coder may hold some of p back until it fills a block: Flush sends it.
func (e *Encoder) Write(p []byte) (int, error) {
	if e.closed {
		return 0, errClosed
	}
	return e.s.Write(p)
}

// Flush makes Output hold everything written so far in a form the client
// can decode at once, without ending the stream, for a response whose
// parts must reach the client as they come (a streamed body, a reply
// that waits between writes): gzip ends its deflate block with an empty
// stored block (a sync flush), brotli ends its meta-block and pads to a
// byte, zstd ends its block. Each flush costs a few bytes and some ratio,
// so the core flushes when the backend pauses, not after every read.
func (e *Encoder) Flush() error {
	if e.closed {
		return errClosed
	}
	return e.s.Flush()
}

// Close ends the stream: the last block and the coding's trailer (gzip's
// CRC-32 and length; zstd goes without its optional checksum) go to
// Output. Write and Flush fail
// afterwards; Close again does nothing.
func (e *Encoder) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	return e.s.Close()
}

// Output is the compressed bytes produced and not yet consumed. The
// slice is valid until the next call on e.
func (e *Encoder) Output() []byte { return e.out.buf[e.out.start:] }

// Consume marks the first n bytes of Output sent. It panics if n is
// more than Output holds, a bug in the caller.
func (e *Encoder) Consume(n int) {
	if n < 0 || n > len(e.out.buf)-e.out.start {
		panic(fmt.Sprintf("compress: Consume(%d) of %d bytes of output", n, len(e.out.buf)-e.out.start))
	}
	e.out.start += n
	if e.out.start == len(e.out.buf) {
		e.out.buf, e.out.start = e.out.buf[:0], 0
	}
}

// Release gives e back to its pool, whether or not its stream was
// closed (a client that went away leaves it open), and its memory back
// to the budget it was taken from; e must not be used afterwards. Its
// output buffer is kept only up to MaxPooledOutput.
func (e *Encoder) Release() {
	if e == nil || e.released {
		return
	}
	e.released = true
	if e.budget != nil {
		e.budget.give(e.cost)
		e.budget = nil
	}
	if cap(e.out.buf) > MaxPooledOutput {
		e.out.buf = nil
	}
	e.out.buf, e.out.start = e.out.buf[:0], 0
	// The stream may still point at the sink; the next Encoder resets
	// it, and nothing else holds the sink's bytes.
	e.pool.Put(e)
}

// poolKey names a pool of encoders: a coding and its level.
type poolKey struct {
	coding Encoding
	level  int
}

// pools holds the encoders of every Policy, one pool per coding and
// level, so that policies with the same levels share them.
var pools sync.Map // poolKey → *sync.Pool

// keyOf names the pool of encoders for e at c's level.
func keyOf(e Encoding, c Config) poolKey {
	key := poolKey{coding: e}
	switch e {
	case Gzip:
		key.level = c.GzipLevel
	case Brotli:
		key.level = c.BrotliLevel
	case Zstd:
		l, _ := zstdLevel(c.ZstdLevel)
		key.level = int(l)
	}
	return key
}

// poolFor returns the pool of encoders of key, making one encoder first
// so that a level the library refuses is an error here rather than a
// panic on the request path.
func poolFor(key poolKey) (*sync.Pool, error) {
	if p, ok := pools.Load(key); ok {
		return p.(*sync.Pool), nil
	}
	pool := &sync.Pool{}
	first, err := newEncoder(key, pool)
	if err != nil {
		return nil, err
	}
	pool.New = func() any {
		enc, err := newEncoder(key, pool)
		if err != nil {
			panic(err) // made once above with the same key
		}
		return enc
	}
	actual, loaded := pools.LoadOrStore(key, pool)
	if !loaded {
		pool.Put(first)
	}
	return actual.(*sync.Pool), nil
}

func newEncoder(key poolKey, pool *sync.Pool) (*Encoder, error) {
	enc := &Encoder{coding: key.coding, pool: pool, closed: true, released: true}
	switch key.coding {
	case Gzip:
		w, err := gzip.NewWriterLevel(nil, key.level)
		if err != nil {
			return nil, fmt.Errorf("compress: gzip level %d: %w", key.level, err)
		}
		enc.s = w
	case Brotli:
		enc.s = brotli.NewWriterOptions(nil, brotli.WriterOptions{Quality: key.level, LGWin: BrotliWindowLog})
	case Zstd:
		w, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.EncoderLevel(key.level)),
			zstd.WithWindowSize(ZstdWindow),
			// One goroutine per stream: the core already runs one per
			// response, and zstd's own would each hold a block.
			zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true),
			// An empty body still gets a frame, which decoders want.
			zstd.WithZeroFrames(true),
			// No content checksum, as libzstd's own default: TLS and TCP
			// already guard the bytes, and the library allocates the
			// checksum's 4 bytes on every Close besides hashing the body.
			zstd.WithEncoderCRC(false),
		)
		if err != nil {
			return nil, fmt.Errorf("compress: zstd level %v: %w", zstd.EncoderLevel(key.level), err)
		}
		enc.s = w
	default:
		return nil, fmt.Errorf("compress: no encoder for %v", key.coding)
	}
	return enc, nil
}
