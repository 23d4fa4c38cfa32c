package h1

// Response is a parsed response head. Byte slices alias the Reader's buffer
// and are valid until the next read on it.
type Response struct {
	Minor  int
	Status int
	Reason []byte
	// Fields are all header fields in order; hop-by-hop and framing fields
	// are marked Hop.
	Fields []Field
	// Body says how the body is framed. ContentLength is the value of the
	// Content-Length field, or -1 without one; a response to HEAD and a 304
	// carry it without a body.
	Body          BodyKind
	ContentLength int64
	// Close reports that the server will close the connection after this
	// response, so the connection must not be reused.
	Close bool
}

// BodyKind is how a message body is delimited.
type BodyKind uint8

// Body framings, RFC 9112 section 6.3.
const (
	BodyNone    BodyKind = iota // no body: HEAD, 1xx, 204, 304, or length 0
	BodyLength                  // exactly ContentLength bytes
	BodyChunked                 // chunked transfer coding
	BodyClose                   // everything until the connection closes
)

// ReadResponse reads and parses the next response head. head reports
// whether it answers a HEAD request, which has no body whatever its fields
// say.
func (r *Reader) ReadResponse(resp *Response, head bool) error {
	h, err := r.readHead()
	if err != nil {
		return err
	}
	return ParseResponse(h, resp, head)
}

// ParseResponse parses a complete response head into resp.
func ParseResponse(h []byte, resp *Response, head bool) error {
	*resp = Response{Fields: resp.Fields[:0]}
	line, rest, err := cutLine(h)
	if err != nil {
		return err
	}
	// status-line = HTTP-version SP status-code SP [ reason-phrase ]
	// A missing SP after the code is tolerated: some servers omit it.
	if len(line) < 12 || line[8] != ' ' {
		return ErrStatusLine
	}
	minor, ok := parseVersion(line[:8])
	if !ok {
		return ErrStatusLine
	}
	resp.Minor = minor
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return ErrStatusLine
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return ErrStatusLine
	}
	resp.Status = code
	if len(line) > 12 {
		if line[12] != ' ' {
			return ErrStatusLine
		}
		resp.Reason = line[13:]
	}

	resp.Fields, err = parseFields(rest, resp.Fields)
	if err != nil {
		return err
	}
	close, keepAlive, _ := markHop(resp.Fields)
	resp.Close = close || (minor == 0 && !keepAlive)
	fr, err := parseFraming(resp.Fields)
	if err != nil {
		// Unlike a request, a response with an unusable length is still
		// readable to the end of the connection, but a proxy that passes
		// on a message it cannot frame invites desync: refuse it.
		return err
	}
	if fr.te && minor == 0 {
		// RFC 9112 section 6.1: Transfer-Encoding in an HTTP/1.0
		// message means faulty framing; read it, but close afterwards.
		resp.Close = true
	}
	resp.ContentLength = fr.length
	switch {
	case head || code < 200 || code == 204 || code == 304:
		resp.Body = BodyNone
	case fr.chunked:
		resp.Body = BodyChunked
	case fr.length == 0:
		resp.Body = BodyNone
	case fr.length > 0:
		resp.Body = BodyLength
	default:
		resp.Body = BodyClose
		resp.Close = true
	}
	return nil
}
