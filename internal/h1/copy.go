package h1

import (
	"io"
	"sync"
)

// copyBufSize is the piece size bodies are copied in. Memory per stream is
// one such buffer, whatever the body's size.
const copyBufSize = 32 << 10

// chunkHeadroom leaves room before the data for a chunk-size line.
const chunkHeadroom = 18

var copyBufs = sync.Pool{New: func() any {
	b := make([]byte, chunkHeadroom+copyBufSize+2)
	return &b
}}

// BodySource is a body being read: its bytes until io.EOF, and then, for a
// chunked body, its trailer section. The source bounds its own waits
// (relay's sources set a read deadline before each read).
type BodySource interface {
	Read(p []byte) (int, error)
	// Trailers returns the raw trailer field lines, each ending in CRLF,
	// once Read has returned io.EOF; nil when there are none.
	Trailers() []byte
}

// CopyBody streams src to dst, framing it as chunked when chunked is set
// (trailers included, those that may pass: trailers.go, less those hops
// names, a comma-separated list such as AppendConnection makes) and as
// plain bytes otherwise. A chunk's size line is
// written into headroom before its data, so every piece is one write. It
// returns the body bytes copied and the error of the side that failed.
func CopyBody(dst io.Writer, src BodySource, chunked bool, hops []byte) (n int64, rerr, werr error) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		k, err := src.Read(buf[chunkHeadroom : chunkHeadroom+copyBufSize])
		if k > 0 {
			var out []byte
			if chunked {
				head := AppendChunkHeader(buf[:0:chunkHeadroom], k)
				start := chunkHeadroom - len(head)
				copy(buf[start:], head)
				out = append(buf[start:chunkHeadroom+k], '\r', '\n')
			} else {
				out = buf[chunkHeadroom : chunkHeadroom+k]
			}
			if _, werr = dst.Write(out); werr != nil {
				return n, nil, werr
			}
			n += int64(k)
		}
		if err == io.EOF {
			if chunked {
				// Only the trailer fields that may follow the content
				// pass (trailers.go).
				last := AppendPassingTrailers(append(buf[:0], '0', '\r', '\n'), src.Trailers(), hops)
				_, werr = dst.Write(append(last, '\r', '\n'))
			}
			return n, nil, werr
		}
		if err != nil {
			return n, err, nil
		}
	}
}
