package h1

import (
	"bytes"
	"encoding/binary"
)

// Field is one header field as received. Name and Value alias the
// connection buffer; Value has surrounding whitespace removed.
type Field struct {
	Name  []byte
	Value []byte
	// Hop marks fields that end at this hop and must not be forwarded:
	// the hop-by-hop fields of RFC 9110 section 7.6.1, every field named in
	// Connection, and the framing fields the writer regenerates.
	Hop bool
}

// Is reports whether the field's name equals name, ignoring ASCII case.
// name must be lower case.
func (f *Field) Is(name string) bool { return equalFold(f.Name, name) }

// maxFields bounds the number of fields in one head.
const maxFields = 128

// tchar marks the characters allowed in a token (RFC 9110 section 5.6.2).
var tchar = [256]bool{}

// vchar marks the characters allowed inside a field value: visible ASCII,
// space, tab and obs-text. Control characters, DEL and NUL are not.
var vchar = [256]bool{}

func init() {
	for c := 'a'; c <= 'z'; c++ {
		tchar[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		tchar[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		tchar[c] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		tchar[c] = true
	}
	for c := 0x21; c <= 0xff; c++ {
		vchar[c] = c != 0x7f
	}
	vchar[' '], vchar['\t'] = true, true
}

// parseFields parses the field lines of a head (after the start line, up to
// and including the blank line) and appends them to fields.
func parseFields(b []byte, fields []Field) ([]Field, error) {
	for {
		if len(b) == 0 {
			return fields, ErrUnexpectedEOF
		}
		switch b[0] {
		case '\r':
			if len(b) < 2 || b[1] != '\n' {
				return fields, ErrBareCR
			}
			return fields, nil
		case '\n':
			return fields, ErrBareLF
		case ' ', '\t':
			return fields, ErrObsFold
		}
		i := 0
		for i < len(b) && tchar[b[i]] {
			i++
		}
		if i == len(b) {
			return fields, ErrFieldName
		}
		switch b[i] {
		case ':':
		case ' ', '\t':
			return fields, ErrWhitespaceColon
		default:
			return fields, ErrFieldName
		}
		if i == 0 {
			return fields, ErrFieldName
		}
		name := b[:i]
		b = b[i+1:]
		j := valueEnd(b)
		if j == len(b) {
			return fields, ErrUnexpectedEOF
		}
		switch {
		case b[j] == '\n':
			return fields, ErrBareLF
		case b[j] != '\r':
			return fields, ErrFieldValue
		case j+1 >= len(b) || b[j+1] != '\n':
			return fields, ErrBareCR
		}
		if len(fields) == maxFields {
			return fields, ErrTooManyFields
		}
		fields = append(fields, Field{Name: name, Value: trimOWS(b[:j])})
		b = b[j+2:]
	}
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// equalFold compares b with lower, an all-lower-case ASCII string, ignoring
// ASCII case in b.
func equalFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// equalFoldBytes compares two byte slices ignoring ASCII case.
func equalFoldBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// nextToken splits a comma-separated list: it returns the first element with
// whitespace trimmed and the rest after the comma. Empty elements come back
// as empty tokens, which callers skip.
func nextToken(list []byte) (tok, rest []byte) {
	if i := bytes.IndexByte(list, ','); i >= 0 {
		return trimOWS(list[:i]), list[i+1:]
	}
	return trimOWS(list), nil
}

// isHopByHop reports whether a field is connection-specific by definition
// (RFC 9110 section 7.6.1, plus the non-standard ones proxies also strip)
// or describes framing the writer regenerates for the next hop.
func isHopByHop(name []byte) bool {
	switch len(name) {
	case 2:
		return equalFold(name, "te")
	case 7:
		return equalFold(name, "trailer") || equalFold(name, "upgrade")
	case 10:
		return equalFold(name, "connection") || equalFold(name, "keep-alive")
	case 14:
		return equalFold(name, "content-length")
	case 16:
		return equalFold(name, "proxy-connection")
	case 17:
		return equalFold(name, "transfer-encoding")
	case 18:
		return equalFold(name, "proxy-authenticate")
	case 19:
		return equalFold(name, "proxy-authorization")
	}
	return false
}

// markHop sets Hop on every hop-by-hop field and every field that a
// Connection field names. It also reports the Connection options relay acts
// on: close, keep-alive and upgrade.
func markHop(fields []Field) (close, keepAlive, upgrade bool) {
	for i := range fields {
		f := &fields[i]
		if !isHopByHop(f.Name) {
			continue
		}
		f.Hop = true
		if !f.Is("connection") {
			continue
		}
		for list := f.Value; len(list) > 0; {
			var tok []byte
			tok, list = nextToken(list)
			switch {
			case len(tok) == 0:
			case equalFold(tok, "close"):
				close = true
			case equalFold(tok, "keep-alive"):
				keepAlive = true
			case equalFold(tok, "upgrade"):
				upgrade = true
			default:
				for j := range fields {
					if equalFoldBytes(fields[j].Name, tok) {
						fields[j].Hop = true
					}
				}
			}
		}
	}
	return close, keepAlive, upgrade
}

// framing holds what the framing fields of a head say about its body.
type framing struct {
	length  int64 // -1 when no Content-Length
	chunked bool
	te      bool // a Transfer-Encoding field is present
}

// parseFraming reads Content-Length and Transfer-Encoding strictly: every
// Content-Length must be the same decimal number, written the same way, and
// a Transfer-Encoding must end in exactly one chunked with no other coding
// before it and no empty list elements.
func parseFraming(fields []Field) (framing, error) {
	fr := framing{length: -1}
	var codings int
	var lengthText []byte // the first Content-Length value, as sent
	for i := range fields {
		f := &fields[i]
		switch len(f.Name) {
		case 14:
			if !f.Is("content-length") {
				continue
			}
			for list := f.Value; ; {
				var tok []byte
				tok, list = nextToken(list)
				n, ok := parseLength(tok)
				if !ok {
					return fr, ErrContentLength
				}
				// Repeats must be byte-identical: "5" and "05" are the
				// same number, but a peer that compares text rejects
				// them, and relay must never accept what a neighbour
				// reads differently.
				if lengthText != nil && !bytes.Equal(lengthText, tok) {
					return fr, ErrConflictingLength
				}
				lengthText = tok
				fr.length = n
				if list == nil {
					break
				}
			}
		case 17:
			if !f.Is("transfer-encoding") {
				continue
			}
			fr.te = true
			for list := f.Value; ; {
				var tok []byte
				tok, list = nextToken(list)
				if len(tok) == 0 {
					// An empty value, "chunked," or ", chunked": RFC
					// 9110 lets a recipient skip empty elements, but Go
					// and nginx refuse anything but a lone "chunked"
					// here, and framing is no place to differ from them.
					return fr, ErrTransferEncoding
				}
				if fr.chunked {
					// chunked must be the final coding, and only once.
					return fr, ErrTransferEncoding
				}
				codings++
				if equalFold(tok, "chunked") {
					fr.chunked = true
				} else if !isToken(tok) {
					return fr, ErrTransferEncoding
				}
				if list == nil {
					break
				}
			}
		}
	}
	if fr.te {
		if fr.length >= 0 {
			return fr, ErrLengthAndEncoding
		}
		if !fr.chunked {
			return fr, ErrTransferEncoding
		}
		if codings > 1 {
			return fr, ErrUnknownEncoding
		}
	}
	return fr, nil
}

// parseLength parses a Content-Length value: 1 to 18 decimal digits.
func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !tchar[c] {
			return false
		}
	}
	return true
}

// valueEnd returns the index of the first byte of b that may not appear in a
// field value (vchar), or len(b). Values are most of a head's bytes, so it
// checks eight at a time: a word is clean when none of its bytes is below
// 0x20 or equal to 0x7f (bytes from 0x80 up are obs-text and allowed). A
// word with a tab or a bad byte is finished one byte at a time.
func valueEnd(b []byte) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		low := (w - 0x20*ones) &^ w & highs // a byte below 0x20
		d := w ^ 0x7f*ones
		del := (d - ones) &^ d & highs // a byte equal to 0x7f
		if low|del != 0 {
			break
		}
	}
	for i < len(b) && vchar[b[i]] {
		i++
	}
	return i
}

// MarkHopByHop marks hop-by-hop fields Hop as parsing a head does, for a
// front door that builds Fields from another protocol's request. It
// reports whether Connection asks for a protocol upgrade.
func MarkHopByHop(fields []Field) (upgrade bool) {
	_, _, upgrade = markHop(fields)
	return upgrade
}

// AppendLower appends name with its ASCII letters in lower case, as
// HTTP/2 writes field names.
func AppendLower(dst, name []byte) []byte {
	n := len(dst)
	dst = append(dst, name...)
	for i, c := range dst[n:] {
		if 'A' <= c && c <= 'Z' {
			dst[n+i] = c + 'a' - 'A'
		}
	}
	return dst
}
