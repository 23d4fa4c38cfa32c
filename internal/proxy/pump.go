package proxy

import (
	"io"
	"net"
	"sync"
	"time"

	"relay/internal/h1"
)

// pumpBufSize is the chunk size bodies are streamed in. Memory per stream
// is one such buffer, whatever the body's size.
const pumpBufSize = 32 << 10

// chunkHeadroom leaves room before the data for a chunk-size line.
const chunkHeadroom = 18

var pumpBufs = sync.Pool{New: func() any {
	b := make([]byte, chunkHeadroom+pumpBufSize+2)
	return &b
}}

// pump streams a body from src, whose bytes arrive on srcConn, to dst,
// re-framing it as chunked when chunked is set (trailers included). Every
// wait for source bytes is bounded by timeout. It returns the body bytes
// copied and the error of the side that failed.
func pump(dst net.Conn, src *h1.Body, srcConn net.Conn, chunked bool, timeout time.Duration) (n int64, rerr, werr error) {
	bp := pumpBufs.Get().(*[]byte)
	defer pumpBufs.Put(bp)
	buf := *bp
	for {
		srcConn.SetReadDeadline(time.Now().Add(timeout))
		k, err := src.Read(buf[chunkHeadroom : chunkHeadroom+pumpBufSize])
		if k > 0 {
			var out []byte
			if chunked {
				head := h1.AppendChunkHeader(buf[:0:chunkHeadroom], k)
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
				_, werr = dst.Write(h1.AppendLastChunk(buf[:0], src.Trailers()))
			}
			return n, nil, werr
		}
		if err != nil {
			return n, err, nil
		}
	}
}
