// Package h1 is relay's HTTP/1.1 wire format: strict parsing and writing of
// request and response heads, body framing (Content-Length, chunked with
// trailers, close-delimited, none), keep-alive and upgrades.
//
// It follows RFC 9112 and is deliberately strict wherever a lenient reading
// could let two parsers disagree about where a message ends (request
// smuggling): conflicting lengths, unknown transfer codings, obs-fold, bare CR
// or LF, control characters and whitespace before a colon are errors, never
// guesses. Parsed values are slices into the connection's buffer and are valid
// until the next read; nothing on the steady-state path allocates.
//
// The package knows nothing of backends, balancing or configuration.
package h1

import "errors"

// Error is a protocol error together with the status code a server answers
// it with. A connection that produced an Error must be closed after the
// answer: its framing can no longer be trusted.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return "h1: " + e.Msg }

func errorf(status int, msg string) *Error { return &Error{Status: status, Msg: msg} }

// Errors returned by the parsers. They are values so callers can compare them
// and so returning one allocates nothing.
var (
	ErrHeadTooLarge      = errorf(431, "message head too large")
	ErrTooManyFields     = errorf(431, "too many header fields")
	ErrRequestLine       = errorf(400, "malformed request line")
	ErrMethod            = errorf(400, "malformed method")
	ErrTarget            = errorf(400, "malformed request target")
	ErrVersion           = errorf(505, "unsupported HTTP version")
	ErrStatusLine        = errorf(502, "malformed status line")
	ErrFieldName         = errorf(400, "malformed header field name")
	ErrFieldValue        = errorf(400, "invalid character in header field value")
	ErrWhitespaceColon   = errorf(400, "whitespace before header colon")
	ErrObsFold           = errorf(400, "obsolete line folding")
	ErrBareCR            = errorf(400, "bare CR in message head")
	ErrBareLF            = errorf(400, "bare LF in message head")
	ErrMissingHost       = errorf(400, "missing Host header")
	ErrDuplicateHost     = errorf(400, "more than one Host header")
	ErrBadHost           = errorf(400, "malformed Host header")
	ErrContentLength     = errorf(400, "malformed Content-Length")
	ErrConflictingLength = errorf(400, "conflicting Content-Length values")
	ErrLengthAndEncoding = errorf(400, "both Content-Length and Transfer-Encoding")
	ErrTransferEncoding  = errorf(400, "Transfer-Encoding does not end in chunked")
	ErrUnknownEncoding   = errorf(501, "unsupported transfer coding")
	ErrEncodingHTTP10    = errorf(400, "Transfer-Encoding in an HTTP/1.0 message")
	ErrChunkSize         = errorf(400, "malformed chunk size")
	ErrChunkExtension    = errorf(400, "malformed chunk extension")
	ErrChunkEnd          = errorf(400, "chunk data not followed by CRLF")
	ErrTrailer           = errorf(400, "malformed trailer section")
	ErrTrailerTooLarge   = errorf(431, "trailer section too large")
)

// ErrUnexpectedEOF reports a connection that closed inside a message.
var ErrUnexpectedEOF = errors.New("h1: connection closed inside a message")
