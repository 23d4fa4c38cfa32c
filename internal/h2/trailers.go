package h2

import (
	"bytes"

	"golang.org/x/net/http2/hpack"

	"relay/internal/h1"
)

// Trailer fields travel both ways. A backend's chunked response ends in
// a trailer section that relay's HTTP/1.1 engine reads (and bounds, at
// 16 KiB) with the body; relay sends it on as a last HEADERS frame with
// END_STREAM after the last DATA frame (RFC 9113 8.1). A client's
// trailer section, a HEADERS frame after its DATA frames, goes to the
// backend after the last chunk of a chunked request body.
//
// Only fields that may follow the content pass, either way: those a
// recipient must act on before the content (framing, routing,
// authentication, request modifiers, response controls, the content's
// format: RFC 9110 6.5.1) and those of one connection (RFC 9113 8.2.2)
// are dropped, as are fields the response's Connection field names, and
// X-Request-Id, which belongs to the head (h1.ForbiddenTrailer).
// Everything else, such as gRPC's grpc-status and grpc-message or a
// checksum, passes as it came, its name in lower case.

// endWithTrailers ends st's response with raw, a backend's trailer section
// as h1 read it (lines "name: value", each ending in CRLF), as a HEADERS
// frame with END_STREAM. hops is what the response head's Connection
// fields name, fields that end at relay (h1.AppendConnection). When no field
// is left to send, the stream ends with an empty DATA frame, as a response
// without trailers does.
func (c *conn) endWithTrailers(st *stream, raw []byte, hops []byte) error {
	if err := c.lockFor(st, 0); err != nil {
		return err
	}
	c.writeTrailers(st, raw, hops)
	c.ended(st)
	err := c.werr
	c.unlockWrite()
	return err
}

// writeTrailers writes the trailer section raw as endWithTrailers says,
// ending the stream. wmu is held.
func (c *conn) writeTrailers(st *stream, raw []byte, hops []byte) {
	// The block begins with the first field that passes: one begun and
	// left unsent could lose the table size update it starts with.
	begun := false
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = bytes.TrimSuffix(raw[:i], []byte{'\r'}), raw[i+1:]
		} else {
			raw = nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			continue // h1 refuses such a line; nothing to send if one came
		}
		c.lower = h1.AppendLower(c.lower[:0], line[:colon])
		name := stringOf(c.lower)
		if h1.ForbiddenTrailer(name) || h1.Named(hops, c.lower) {
			continue
		}
		value := bytes.Trim(line[colon+1:], " \t")
		if !begun {
			c.enc.BeginTrailers()
			begun = true
		}
		c.enc.Field(name, stringOf(value))
	}
	if !begun {
		c.wfr.WriteData(st.id, true, nil)
		c.dataSent.Add(1)
	} else {
		c.writeBlock(st.id, true)
	}
}

// appendTrailers appends a client's trailer fields that may pass, as
// HTTP/1.1 trailer lines, to dst. The frame reader and checkTrailers have
// already refused names and values HTTP/1.1 could read another way.
func appendTrailers(dst []byte, fields []hpack.HeaderField) []byte {
	for _, hf := range fields {
		if h1.ForbiddenTrailer(hf.Name) {
			continue
		}
		dst = append(dst, hf.Name...)
		dst = append(dst, ':', ' ')
		dst = append(dst, hf.Value...)
		dst = append(dst, '\r', '\n')
	}
	return dst
}
