package core

import (
	"bytes"
	"unsafe"

	"golang.org/x/net/http2/hpack"

	"relay/internal/h1"
)

// The request to an HTTP/2 backend is the one prepare builds for HTTP/1.1
// (Host, X-Forwarded-*, Via, X-Request-Id, the route's changes, sticky
// cookies), read back into HTTP/2 fields: one builder of what a backend
// sees, whatever protocol carries it. The fields are views of x.head's
// bytes, valid until the head is built again; the HPACK encoder copies
// them as it writes.

// streamHead fills x.fields with the request as HTTP/2 fields and returns
// the body bytes prepare put behind the head. scheme is "https" or
// "http", the backend's.
func (x *Exchange) streamHead(scheme string) (inline []byte) {
	// prepare wrote the head, each line ending in CRLF and an empty line
	// last, and then x.inline body bytes.
	head := x.head[:len(x.head)-int(x.inline)]
	inline = x.head[len(head):]
	head = head[:len(head)-2]
	line, rest := cutLine(head)
	sp1 := bytes.IndexByte(line, ' ')
	method, target := line[:sp1], line[sp1+1:]
	target = target[:bytes.IndexByte(target, ' ')]
	fs := append(x.fields[:0],
		hpack.HeaderField{Name: ":method", Value: stringOf(method)},
		hpack.HeaderField{Name: ":scheme", Value: scheme},
		hpack.HeaderField{Name: ":authority"},
		hpack.HeaderField{Name: ":path", Value: stringOf(target)})
	names := x.names[:0]
	te := false
	for len(rest) > 0 {
		line, rest = cutLine(rest)
		colon := bytes.IndexByte(line, ':')
		name, value := line[:colon], line[colon+1:]
		for len(value) > 0 && (value[0] == ' ' || value[0] == '\t') {
			value = value[1:]
		}
		// The names are told apart by length first: most are none of
		// these.
		switch len(name) {
		case len("host"):
			if equalFold(name, "host") {
				fs[2].Value = stringOf(value)
				continue
			}
		case len("te"):
			if equalFold(name, "te") {
				// Only "trailers" may pass (RFC 9113 8.2.2).
				te = te || containsToken(value, "trailers")
				continue
			}
		case len("upgrade"), len("connection"), len("proxy-connection"), len("transfer-encoding"):
			if connectionSpecific(name) {
				continue
			}
		}
		// Names from an HTTP/2 client are in lower case already; those
		// relay adds (X-Forwarded-For, Via) and an HTTP/1.1 client's
		// are lowered into x.names.
		var n string
		if hasUpper(name) {
			start := len(names)
			names = h1.AppendLower(names, name)
			n = stringOf(names[start:])
		} else {
			n = stringOf(name)
		}
		// A value new on every request would only push the others out
		// of the backend's HPACK table: it is never indexed. relay's
		// traceparent is one (its span id is the request's own).
		fs = append(fs, hpack.HeaderField{Name: n, Value: stringOf(value), Sensitive: perRequest(n)})
	}
	if te || x.grpc || x.clientTE() {
		// gRPC servers may insist on it; it says the client reads
		// trailers, which relay carries.
		fs = append(fs, hpack.HeaderField{Name: "te", Value: "trailers"})
	}
	if fs[2].Value == "" {
		fs = append(fs[:2], fs[3:]...)
	}
	x.fields, x.names = fs, names
	return inline
}

// perRequest reports whether the field named n, lower case, has a value
// of its own on every request.
func perRequest(n string) bool {
	return n == "x-request-id" || n == "grpc-timeout" || n == "traceparent"
}

// hasUpper reports whether name holds an upper-case ASCII letter.
func hasUpper(name []byte) bool {
	for _, c := range name {
		if 'A' <= c && c <= 'Z' {
			return true
		}
	}
	return false
}

// cutLine cuts the first line, which ends in CRLF, from head.
func cutLine(head []byte) (line, rest []byte) {
	i := bytes.IndexByte(head, '\n')
	return head[:i-1], head[i+1:]
}

// clientTE reports whether the client said it reads trailers (TE:
// trailers), which prepare leaves out of an HTTP/1.1 request.
func (x *Exchange) clientTE() bool {
	for i := range x.Req.Fields {
		if f := &x.Req.Fields[i]; f.Is("te") && containsToken(f.Value, "trailers") {
			return true
		}
	}
	return false
}

var (
	crlf  = []byte("\r\n")
	colon = []byte(":")
)

// trailerFields fills x.fields with trailer lines as HTTP/1.1 carries
// them ("name: value\r\n"), less those hops names, as HTTP/2 fields.
func (x *Exchange) trailerFields(raw, hops []byte) []hpack.HeaderField {
	x.trailerBuf = h1.AppendPassingTrailers(x.trailerBuf[:0], raw, hops)
	rest := x.trailerBuf
	fs := x.fields[:0]
	names := x.names[:0]
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, crlf)
		name, value, ok := bytes.Cut(l, colon)
		if !ok || connectionSpecific(name) {
			continue
		}
		start := len(names)
		names = h1.AppendLower(names, bytes.TrimSpace(name))
		fs = append(fs, hpack.HeaderField{Name: stringOf(names[start:]), Value: stringOf(bytes.TrimSpace(value))})
	}
	x.fields, x.names = fs, names
	return fs
}

// connectionSpecific reports the fields HTTP/2 forbids (RFC 9113 8.2.2):
// they end at the hop HTTP/1.1 gave them.
func connectionSpecific(name []byte) bool {
	for _, n := range [...]string{"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"} {
		if equalFold(name, n) {
			return true
		}
	}
	return false
}

// equalFold reports whether b equals the lower-case s, ignoring ASCII
// case.
func equalFold(b []byte, s string) bool {
	f := h1.Field{Name: b}
	return f.Is(s)
}

// containsToken reports whether a comma-separated list holds tok, in any
// case.
func containsToken(list []byte, tok string) bool {
	for len(list) > 0 {
		var t []byte
		t, list, _ = bytes.Cut(list, []byte(","))
		if t = bytes.TrimSpace(t); equalFold(t, tok) {
			return true
		}
		if i := bytes.IndexByte(t, ';'); i >= 0 && equalFold(bytes.TrimSpace(t[:i]), tok) {
			return true
		}
	}
	return false
}

// stringOf views b as a string without copying; b must not change while
// the string is in use.
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// bytesOf views s as bytes without copying; they must not be written.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }
