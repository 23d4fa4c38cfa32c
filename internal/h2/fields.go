package h2

import (
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The frame reader already refuses field names that are not lower-case
// tokens, values with control characters (NUL, CR, LF among them), and
// pseudo-fields after regular ones or repeated (RFC 9113 8.2.1, 8.3): a
// header section breaking those is a stream error before relay sees it.
// What it lets through, and RFC 9113 still makes malformed, is checked
// here.

// untrimmed reports whether a field value starts or ends with a space or
// a tab, which makes a request malformed (RFC 9113 8.2.1): an HTTP/1.1
// parser would strip it, so a value forwarded as is could be read one way
// by relay and another by the backend.
func untrimmed(v string) bool {
	if v == "" {
		return false
	}
	first, last := v[0], v[len(v)-1]
	return first == ' ' || first == '\t' || last == ' ' || last == '\t'
}

// connectionSpecific reports whether a field named name, with value v,
// is one HTTP/2 does not carry, making the message malformed (RFC 9113
// 8.2.2): the fields of HTTP/1.1's connection management, and TE with
// any value but "trailers".
func connectionSpecific(name, v string) bool {
	switch name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return true
	case "te":
		return v != "trailers"
	}
	return false
}

// checkTrailers reports what is wrong with a request's trailer section:
// PROTOCOL_ERROR for a malformed one (RFC 9113 8.1: pseudo-fields belong
// only to the header section; 8.2.1 and 8.2.2 as for headers), NO_ERROR
// for a well-formed one. A malformed section resets its stream: the
// backend sees the body cut short, not complete without its trailers
// (trailers.go).
func checkTrailers(fields []hpack.HeaderField) http2.ErrCode {
	for _, hf := range fields {
		if hf.IsPseudo() || connectionSpecific(hf.Name, hf.Value) || untrimmed(hf.Value) {
			return http2.ErrCodeProtocol
		}
	}
	return http2.ErrCodeNo
}
