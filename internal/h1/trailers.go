package h1

import (
	"bytes"
	"strings"
)

// Trailer fields pass through relay, a client's to the backend and a
// backend's to the client, but only those that may follow the content:
// fields a recipient must act on before the content (framing, routing,
// authentication, request modifiers, response controls, the content's
// format: RFC 9110 6.5.1) and those of one connection are dropped, as is
// X-Request-Id. The request's id travels in the head (core/requestid.go):
// one in the trailers would give the backend a second id the client
// chose, or the client a second id the backend chose, to whoever reads
// trailers as header fields.

// ForbiddenTrailer reports whether a trailer field named name, in lower
// case, stays behind.
func ForbiddenTrailer(name string) bool {
	if forbiddenPrefix(name) {
		return true
	}
	switch name {
	case
		// connection management and framing
		"connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade", "content-length",
		// routing and request modifiers
		"host", "expect", "max-forwards", "range",
		// authentication
		"authorization", "www-authenticate",
		// state (a Cookie after the content would reach a backend that
		// merges trailers past what relay read in the head, such as
		// the sticky cookie indirect removes)
		"cookie", "set-cookie",
		// response controls and the content's format and coding
		"cache-control", "pragma", "content-type", "content-encoding", "content-range",
		// the request's id, which belongs to the head
		"x-request-id":
		return true
	}
	return false
}

// longestForbidden is the length of the longest name ForbiddenTrailer
// lists whole ("transfer-encoding"); a longer name is forbidden only by
// its prefix.
const longestForbidden = len("transfer-encoding")

// AppendPassingTrailers appends to dst the lines of raw, a trailer section
// as Body reads it (lines "name: value", each ending in CRLF, already
// checked), whose fields ForbiddenTrailer lets pass and hops (a
// comma-separated list of names, any case) does not name.
func AppendPassingTrailers(dst, raw, hops []byte) []byte {
	var lower [longestForbidden]byte
	for len(raw) > 0 {
		end := len(raw)
		for i, c := range raw {
			if c == '\n' {
				end = i + 1
				break
			}
		}
		line := raw[:end]
		raw = raw[end:]
		colon := 0
		for colon < len(line) && line[colon] != ':' {
			colon++
		}
		name := line[:colon]
		n := min(len(name), len(lower))
		for i := range n {
			c := name[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower[i] = c
		}
		// A name longer than every whole name listed is tested on its
		// first bytes, for the prefixes; the conversion does not
		// allocate, as the string lives only for the call.
		if len(name) > len(lower) {
			if forbiddenPrefix(string(lower[:])) {
				continue
			}
		} else if ForbiddenTrailer(string(lower[:n])) {
			continue
		}
		if len(hops) > 0 && Named(hops, name) {
			continue
		}
		dst = append(dst, line...)
	}
	return dst
}

// forbiddenPrefix reports whether name starts as a field name
// ForbiddenTrailer drops by prefix: Proxy-Authorization,
// Proxy-Authenticate, Proxy-Connection...; conditionals (If-Match,
// If-None-Match...), which modify a request before any content.
func forbiddenPrefix(name string) bool {
	return strings.HasPrefix(name, "proxy-") || strings.HasPrefix(name, "if-")
}

// AppendConnection appends to dst the values of head's Connection fields,
// each followed by a comma: the names of fields that are for one hop only,
// in the trailers as in the head. The head's bytes may be overwritten
// once its body is read; the names are copied for the trailers.
func AppendConnection(dst []byte, head []Field) []byte {
	for i := range head {
		if head[i].Is("connection") {
			dst = append(append(dst, head[i].Value...), ',')
		}
	}
	return dst
}

// Named reports whether the comma-separated list names name, in any case.
func Named(list, name []byte) bool {
	for len(list) > 0 {
		tok := list
		if j := bytes.IndexByte(list, ','); j >= 0 {
			tok, list = list[:j], list[j+1:]
		} else {
			list = nil
		}
		if bytes.EqualFold(bytes.Trim(tok, " \t"), name) {
			return true
		}
	}
	return false
}
