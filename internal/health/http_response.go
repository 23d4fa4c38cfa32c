package health

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
)

// The HTTP probe's response reader: a status line, a head and a body read
// through one small buffer. It parses only what a probe needs: the status,
// and the three headers that say where the response ends (Content-Length,
// Transfer-Encoding and Connection), so that a connection kept between probes
// is left exactly at the start of the next response. Where a response is odd
// but readable (a length beside a transfer coding, a header line that does
// not parse) the body is read as an HTTP client would read it and the
// connection is not kept; a Content-Length that cannot be believed
// (malformed, or two different values) fails the check, as in net/http.

// maxDrain bounds how much of a health response body is read. The body is
// read so that a backend that sends a 2xx head and then stalls fails the
// check, but a chatty status page should not cost more than this: a 2xx
// still going after maxDrain bytes passes, and its connection is closed.
const maxDrain = 64 << 10

// maxInterim bounds the interim (1xx) responses skipped before the final one.
const maxInterim = 5

// readBufSize is the buffer a response is read through. The status line and
// the framing headers must fit in it; other header lines need not.
const readBufSize = 512

// responseReader reads an HTTP/1.x response through a small buffer.
type responseReader struct {
	conn net.Conn
	buf  []byte
	r, w int  // buf[r:w] is read from conn and not yet consumed
	got  bool // some byte of the response has arrived
}

// framing is what a response head says about where its body ends.
type framing struct {
	length  int64 // Content-Length, or -1 when there is none
	coded   bool  // a Transfer-Encoding header is present
	chunked bool  // the last transfer coding is chunked
	close   bool  // the connection ends with this response
	odd     bool  // readable, but not to be trusted with the next response
}

// errLineTooLong reports a line longer than the read buffer where the whole
// line matters (the status line); a health endpoint has no reason to send one.
var errLineTooLong = errors.New("line too long")

// finalStatus returns the status code and the whole status line of the final
// response (valid until the next read), skipping interim 1xx responses as an
// HTTP client does. 101 Switching Protocols is final: a probe never asks to
// upgrade.
func (r *responseReader) finalStatus() (code int, line []byte, err error) {
	for range maxInterim + 1 {
		line, err := r.line()
		if err != nil {
			return 0, nil, err
		}
		code, ok := parseStatusLine(line)
		if !ok {
			return 0, nil, fmt.Errorf("malformed status line %q", line)
		}
		if code >= 200 || code == 101 {
			return code, line, nil
		}
		if _, err := r.head(); err != nil {
			return 0, nil, err
		}
	}
	return 0, nil, fmt.Errorf("more than %d interim responses", maxInterim)
}

// parseStatusLine reads the code of "HTTP/1.x NNN reason" and reports
// whether the line has that shape. The reason phrase may be empty, with or
// without the space before it.
func parseStatusLine(line []byte) (code int, ok bool) {
	const prefix = "HTTP/1."
	if len(line) < len("HTTP/1.1 200") || string(line[:len(prefix)]) != prefix {
		return 0, false
	}
	if v := line[len(prefix)]; v < '0' || v > '9' || line[len(prefix)+1] != ' ' {
		return 0, false
	}
	for _, c := range line[len(prefix)+2 : len(prefix)+5] {
		if c < '0' || c > '9' {
			return 0, false
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 || len(line) > len(prefix)+5 && line[len(prefix)+5] != ' ' {
		return 0, false
	}
	return code, true
}

// head reads the header lines after a status line through the empty line
// that ends them, and returns what they say about the body. Lines longer
// than the buffer are skipped, and fail the check if they are framing
// headers.
func (r *responseReader) head() (framing, error) {
	f := framing{length: -1}
	for {
		line, cut, err := r.longLine()
		if err != nil {
			return f, err
		}
		if cut {
			if isFraming(line) {
				return f, fmt.Errorf("header %.30q... longer than %d bytes", line, readBufSize)
			}
			continue
		}
		if len(line) == 0 {
			if f.coded && f.length >= 0 {
				// Transfer-Encoding wins (RFC 9112, 6.3), but a message
				// with both is how requests are smuggled: not kept.
				f.length, f.odd = -1, true
			}
			return f, nil
		}
		if err := f.add(line); err != nil {
			return f, err
		}
	}
}

// add reads one header line into f.
func (f *framing) add(line []byte) error {
	name, value, ok := bytes.Cut(line, []byte{':'})
	if !ok || len(name) == 0 || bytes.ContainsAny(name, " \t") {
		// No colon, a space before it, or a folded line: skipped, as
		// lenient clients do, but the connection is not kept.
		f.odd = true
		return nil
	}
	value = bytes.Trim(value, " \t")
	switch {
	case asciiEqualFold(name, "Content-Length"):
		n, ok := parseLength(value)
		if !ok {
			return fmt.Errorf("malformed Content-Length %q", value)
		}
		if f.length >= 0 && f.length != n {
			return fmt.Errorf("conflicting Content-Length values %d and %d", f.length, n)
		}
		f.length = n
	case asciiEqualFold(name, "Transfer-Encoding"):
		f.coded = true
		// Codings are listed in the order they were applied; the body ends
		// where chunked says only if chunked was applied last.
		last := value
		if i := bytes.LastIndexByte(value, ','); i >= 0 {
			last = bytes.Trim(value[i+1:], " \t")
		}
		f.chunked = asciiEqualFold(last, "chunked")
	case asciiEqualFold(name, "Connection"):
		for tok := range bytes.SplitSeq(value, []byte{','}) {
			if asciiEqualFold(bytes.Trim(tok, " \t"), "close") {
				f.close = true
			}
		}
	}
	return nil
}

// isFraming reports whether a header line starts with the name of a header
// that frames the body.
func isFraming(line []byte) bool {
	name, _, _ := bytes.Cut(line, []byte{':'})
	return asciiEqualFold(name, "Content-Length") || asciiEqualFold(name, "Transfer-Encoding") ||
		asciiEqualFold(name, "Connection")
}

// body reads the body of a response with the given status and framing, up to
// limit bytes of content, and reports whether it read all of it, leaving the
// connection at the start of the next response.
func (r *responseReader) body(code int, f framing, limit int) (complete bool, err error) {
	switch {
	case code == 204 || code == 304:
		return true, nil
	case f.chunked:
		return r.chunked(limit)
	case f.coded: // not chunked: the body runs until the backend closes
		return false, r.drain(limit)
	case f.length > int64(limit):
		return false, r.discard(limit)
	case f.length >= 0:
		return true, r.discard(int(f.length))
	default: // no length: the body runs until the backend closes
		return false, r.drain(limit)
	}
}

// chunked reads a chunked body and its trailers. Past limit bytes of chunk
// data it stops and reports the body incomplete.
func (r *responseReader) chunked(limit int) (complete bool, err error) {
	read := 0
	for {
		line, _, err := r.longLine()
		if err != nil {
			return false, err
		}
		size, ok := parseChunkSize(line)
		if !ok {
			return false, fmt.Errorf("malformed chunk size line %q", line)
		}
		if size == 0 {
			break
		}
		if size > int64(limit-read) {
			return false, r.discard(limit - read)
		}
		read += int(size)
		if err := r.discard(int(size)); err != nil {
			return false, err
		}
		if line, err := r.line(); err != nil || len(line) != 0 {
			if err == nil {
				err = errors.New("chunk data longer than its size")
			}
			return false, err
		}
	}
	for { // trailer fields, through the empty line
		line, _, err := r.longLine()
		if err != nil {
			return false, err
		}
		if len(line) == 0 {
			return true, nil
		}
	}
}

// longLine is line for lines whose start is all that matters: header
// fields other than the framing ones, a chunk size line with a long
// extension, a trailer field. Of a line longer than the buffer it returns as
// much as fits, with cut set, and skips the rest.
func (r *responseReader) longLine() (line []byte, cut bool, err error) {
	line, err = r.line()
	if err != errLineTooLong {
		return line, false, err
	}
	start := append([]byte(nil), r.buf[r.r:r.w]...)
	return start, true, r.skipLine()
}

// parseChunkSize reads the hexadecimal size at the start of a chunk size
// line, before any extension. Sizes above 2^40 are refused as malformed.
func parseChunkSize(line []byte) (int64, bool) {
	var n int64
	i := 0
	for ; i < len(line); i++ {
		d, ok := hexDigit(line[i])
		if !ok {
			break
		}
		if n >= 1<<36 {
			return 0, false
		}
		n = n<<4 | int64(d)
	}
	if i == 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(line[i:], " \t")
	return n, len(rest) == 0 || rest[0] == ';'
}

// hexDigit returns the value of a hexadecimal digit.
func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	}
	if lower := c | 0x20; 'a' <= lower && lower <= 'f' {
		return lower - 'a' + 10, true
	}
	return 0, false
}

// parseLength reads a Content-Length value: decimal digits only, at most 18
// of them.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// asciiEqualFold reports whether b equals s ignoring ASCII case; s is
// written in any case with letters only where b may have them.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		if b[i]|0x20 != s[i]|0x20 {
			return false
		}
	}
	return true
}

// line returns the next line without its line ending (CRLF, or a bare LF
// as lenient clients accept). The line is valid until the next read. A line
// that does not fit in the buffer is errLineTooLong, with as much of it as
// fits at buf[r:w].
func (r *responseReader) line() ([]byte, error) {
	for {
		if i := bytes.IndexByte(r.buf[r.r:r.w], '\n'); i >= 0 {
			line := r.buf[r.r : r.r+i]
			r.r += i + 1
			return bytes.TrimSuffix(line, []byte{'\r'}), nil
		}
		if r.r > 0 {
			r.w = copy(r.buf, r.buf[r.r:r.w])
			r.r = 0
		}
		if r.w == len(r.buf) {
			return nil, errLineTooLong
		}
		if err := r.fill(); err != nil {
			return nil, err
		}
	}
}

// skipLine discards the rest of the current line, through its line feed.
func (r *responseReader) skipLine() error {
	for {
		if i := bytes.IndexByte(r.buf[r.r:r.w], '\n'); i >= 0 {
			r.r += i + 1
			return nil
		}
		r.r, r.w = 0, 0
		if err := r.fill(); err != nil {
			return err
		}
	}
}

// discard consumes the next n bytes of the response.
func (r *responseReader) discard(n int) error {
	for r.w-r.r < n {
		n -= r.w - r.r
		r.r, r.w = 0, 0
		if err := r.fill(); err != nil {
			return err
		}
	}
	r.r += n
	return nil
}

// fill reads more of the response after buf[:w]. The end of the response
// is an error here: the response is not complete.
func (r *responseReader) fill() error {
	n, err := r.conn.Read(r.buf[r.w:])
	r.w += n
	r.got = r.got || n > 0
	if n == 0 && err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	return nil
}

// drain reads the rest of the response until the backend closes the
// connection, or until limit bytes have been read.
func (r *responseReader) drain(limit int) error {
	read := r.w - r.r
	r.r = r.w
	for read < limit {
		n, err := r.conn.Read(r.buf)
		read += n
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}
