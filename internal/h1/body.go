package h1

import (
	"bytes"
	"io"
)

// maxTrailerBytes bounds the trailer section of a chunked body.
const maxTrailerBytes = 16 << 10

// Body reads one message body off a Reader, removing its framing: Read
// returns the body's bytes and io.EOF at its end. For a chunked body the
// trailer fields are kept and available from Trailers after io.EOF.
// A Body is reused across messages; Reset prepares it for the next.
type Body struct {
	r         *Reader
	kind      BodyKind
	remaining int64 // BodyLength: bytes left; BodyChunked: bytes left in this chunk
	inChunk   bool  // BodyChunked: inside chunk data (remaining > 0 or its CRLF pending)
	done      bool
	err       error
	trailers  []byte // raw trailer lines, each ending in CRLF
}

// Reset starts reading a body of the given kind from r. length is used for
// BodyLength.
func (b *Body) Reset(r *Reader, kind BodyKind, length int64) {
	*b = Body{r: r, kind: kind, remaining: length, trailers: b.trailers[:0]}
	if kind == BodyNone || (kind == BodyLength && length <= 0) {
		b.done = true
	}
}

// Done reports whether the whole body, framing included, has been read.
func (b *Body) Done() bool { return b.done }

// Remaining is the number of bytes left in a BodyLength body.
func (b *Body) Remaining() int64 { return b.remaining }

// Trailers returns the raw trailer field lines of a chunked body, each
// ending in CRLF, once the body has been read to its end.
func (b *Body) Trailers() []byte { return b.trailers }

// Read reads body bytes into p.
func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.done {
		return 0, io.EOF
	}
	var n int
	switch b.kind {
	case BodyLength:
		n, b.err = b.readLength(p)
	case BodyChunked:
		n, b.err = b.readChunked(p)
	case BodyClose:
		n, b.err = b.r.Read(p)
		if b.err == io.EOF {
			b.done = true
		}
	}
	if b.err == nil && b.done {
		// Report the end together with the last bytes where possible.
		return n, io.EOF
	}
	return n, b.err
}

// Socket is a connection that can say, without waiting or consuming
// anything, whether bytes (or its end) wait to be read: rawio.Conn.
type Socket interface{ Readable() bool }

// readyFills bounds the reads Ready makes to see past a chunk's framing.
const readyFills = 4

// Ready reports whether Read would now return body bytes, or the body's
// end or an error, without waiting for the connection: the buffer holds
// them, or sock has bytes to read, which for a body of known length or
// one read to its close are body bytes. Between a chunked body's chunks
// the next bytes are framing, which says nothing of whether data
// follows: a backend that paused after a chunk has usually sent its
// CRLF, and it may have sent the next size line too. So there Ready
// looks for the next data byte, or the end of the body, in the buffer,
// reading into it what sock already has (a few reads at most, each of
// what has arrived), and says false when only framing came.
func (b *Body) Ready(sock Socket) bool {
	switch {
	case b.err != nil || b.done:
		return true
	case b.kind != BodyChunked || (b.inChunk && b.remaining > 0):
		return b.r.Buffered() > 0 || sock.Readable()
	}
	for i := 0; ; i++ {
		if next := b.nextChunk(); next != framingShort {
			return true
		}
		if i == readyFills || !sock.Readable() {
			return false
		}
		if err := b.r.fill(); err != nil {
			return true // Read meets the error at once
		}
	}
}

// What the buffered bytes after a chunk's data, or before the first
// chunk, hold.
const (
	framingShort = iota // only framing, or part of it
	framingData         // framing then at least one data byte
	framingEnd          // the last chunk and the end of the trailers
	framingBad          // malformed, which Read reports at once
)

// nextChunk looks at the buffered framing that comes next, consuming
// nothing.
func (b *Body) nextChunk() int {
	p := b.r.Peek()
	if b.inChunk {
		// The chunk's data is read; its CRLF comes first.
		if len(p) < 2 {
			return framingShort
		}
		if p[0] != '\r' || p[1] != '\n' {
			return framingBad
		}
		p = p[2:]
	}
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		return framingShort
	}
	if i == 0 || p[i-1] != '\r' {
		return framingBad
	}
	size, err := parseChunkSize(p[:i-1])
	if err != nil {
		return framingBad
	}
	p = p[i+1:]
	if size > 0 {
		if len(p) > 0 {
			return framingData
		}
		return framingShort
	}
	// The last chunk: the trailer section ends with an empty line.
	if bytes.HasPrefix(p, crlf) || bytes.Contains(p, crlfcrlf) {
		return framingEnd
	}
	return framingShort
}

var (
	crlf     = []byte("\r\n")
	crlfcrlf = []byte("\r\n\r\n")
)

func (b *Body) readLength(p []byte) (int, error) {
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.r.Read(p)
	b.remaining -= int64(n)
	if b.remaining == 0 {
		b.done = true
		return n, nil
	}
	if err == io.EOF {
		err = ErrUnexpectedEOF
	}
	return n, err
}

func (b *Body) readChunked(p []byte) (int, error) {
	if b.inChunk && b.remaining == 0 {
		// The previous call ended a chunk's data without its CRLF in
		// the buffer. Finish it here so this call returns data or the
		// end rather than (0, nil).
		if err := b.endChunk(); err != nil {
			return 0, err
		}
	}
	for !b.inChunk {
		line, err := b.r.readLine()
		if err != nil {
			return 0, chunkErr(err)
		}
		size, err := parseChunkSize(line)
		if err != nil {
			return 0, err
		}
		if size == 0 {
			if err := b.readTrailers(); err != nil {
				return 0, err
			}
			b.done = true
			return 0, nil
		}
		b.remaining, b.inChunk = size, true
	}
	if int64(len(p)) > b.remaining {
		p = p[:b.remaining]
	}
	n, err := b.r.Read(p)
	b.remaining -= int64(n)
	if err == io.EOF {
		err = ErrUnexpectedEOF
	}
	if err != nil || b.remaining > 0 || b.r.Buffered() < 2 {
		return n, err
	}
	// The chunk's CRLF is already buffered: consume it now rather than
	// in the next call.
	return n, b.endChunk()
}

// endChunk consumes the CRLF after chunk data. It looks at exactly two
// bytes: data that overruns its size is refused at once, not after
// searching the rest of the connection for a line end.
func (b *Body) endChunk() error {
	for b.r.Buffered() < 2 {
		if err := b.r.fill(); err != nil {
			return chunkErr(err)
		}
	}
	if p := b.r.Peek(); p[0] != '\r' || p[1] != '\n' {
		return ErrChunkEnd
	}
	b.r.Discard(2)
	b.inChunk = false
	return nil
}

func (b *Body) readTrailers() error {
	for {
		line, err := b.r.readLine()
		switch err {
		case nil:
		case ErrBareLF:
			return ErrTrailer
		case ErrHeadTooLarge:
			return ErrTrailerTooLarge
		default:
			return chunkErr(err)
		}
		if len(line) == 0 {
			return nil
		}
		if len(b.trailers)+len(line)+2 > maxTrailerBytes {
			return ErrTrailerTooLarge
		}
		if !validFieldLine(line) {
			return ErrTrailer
		}
		b.trailers = append(append(b.trailers, line...), '\r', '\n')
	}
}

func chunkErr(err error) error {
	switch err {
	case ErrBareLF, ErrHeadTooLarge:
		return ErrChunkSize
	case io.EOF:
		return ErrUnexpectedEOF
	}
	return err
}

// validFieldLine checks one trailer line: a token, a colon, a value.
func validFieldLine(line []byte) bool {
	i := bytes.IndexByte(line, ':')
	if i <= 0 || !isToken(line[:i]) {
		return false
	}
	for _, c := range line[i+1:] {
		if !vchar[c] {
			return false
		}
	}
	return true
}

// parseChunkSize parses "chunk-size [ chunk-ext ]": 1 to 15 hex digits,
// optionally followed by whitespace and ";"-separated extensions made of
// visible characters. Extensions are ignored.
func parseChunkSize(line []byte) (int64, error) {
	var n int64
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			goto ext
		}
		if i == 15 {
			return 0, ErrChunkSize
		}
		n = n<<4 | int64(d)
	}
ext:
	if i == 0 {
		return 0, ErrChunkSize
	}
	rest := line[i:]
	for len(rest) > 0 && (rest[0] == ' ' || rest[0] == '\t') {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		if i < len(line) {
			return 0, ErrChunkSize // whitespace with nothing after it
		}
		return n, nil
	}
	if rest[0] != ';' {
		return 0, ErrChunkSize
	}
	for _, c := range rest {
		if !vchar[c] {
			return 0, ErrChunkExtension
		}
	}
	return n, nil
}

// AppendChunkHeader appends the size line of an n-byte chunk.
func AppendChunkHeader(dst []byte, n int) []byte {
	const hex = "0123456789abcdef"
	var tmp [16]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = hex[n&0xf]
		n >>= 4
		if n == 0 {
			break
		}
	}
	dst = append(dst, tmp[i:]...)
	return append(dst, '\r', '\n')
}

// AppendLastChunk appends the zero-size chunk that ends a chunked body, the
// given raw trailer lines and the final CRLF.
func AppendLastChunk(dst, trailers []byte) []byte {
	dst = append(dst, '0', '\r', '\n')
	dst = append(dst, trailers...)
	return append(dst, '\r', '\n')
}
