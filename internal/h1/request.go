package h1

import (
	"bytes"
	"net/netip"
)

// Request is a parsed request head. Byte slices alias the Reader's buffer
// and are valid until the next read on it. A Request is reused across the
// requests of a connection so parsing allocates nothing.
type Request struct {
	Method []byte
	// Target is the request target in origin form (or "*" for OPTIONS).
	// An absolute-form target is reduced to its path and query, and its
	// authority replaces Host, as RFC 9112 section 3.2.2 requires.
	Target []byte
	// Minor is the minor HTTP version: 0 or 1.
	Minor int
	// Host is the authority the request is for.
	Host []byte
	// Fields are all header fields in order. Hop-by-hop and framing fields
	// are marked Hop; the Host field is marked too, since Host is written
	// from the Host value above.
	Fields []Field
	// ContentLength is the body length, or -1 when the body is chunked.
	// A request without framing fields has a body of length 0.
	ContentLength int64
	// Chunked reports a chunked request body.
	Chunked bool
	// Close reports that the client wants the connection closed after this
	// exchange (Connection: close, or HTTP/1.0 without keep-alive).
	Close bool
	// Upgrade reports a protocol upgrade request: Connection names upgrade
	// and an Upgrade field is present. UpgradeProto is its value.
	Upgrade      bool
	UpgradeProto []byte
	// Expect100 reports Expect: 100-continue.
	Expect100 bool
}

// HasBody reports whether a body follows the head.
func (r *Request) HasBody() bool { return r.Chunked || r.ContentLength > 0 }

// IsMethod reports whether the method is m (methods are case-sensitive).
func (r *Request) IsMethod(m string) bool { return string(r.Method) == m }

// Idempotent reports whether the method is idempotent (RFC 9110 section
// 9.2.2), which makes the request safe to send again after a failure.
func (r *Request) Idempotent() bool {
	switch string(r.Method) {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

// ReadRequest reads and parses the next request head into req.
// io.EOF means the client closed the connection between requests.
func (r *Reader) ReadRequest(req *Request) error {
	head, err := r.readHead()
	if err != nil {
		return err
	}
	return ParseRequest(head, req)
}

// ParseRequest parses a complete request head, from the request line through
// the blank line, into req.
func ParseRequest(head []byte, req *Request) error {
	*req = Request{Fields: req.Fields[:0]}
	line, rest, err := cutLine(head)
	if err != nil {
		return err
	}
	// request-line = method SP request-target SP HTTP-version
	sp := bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return ErrRequestLine
	}
	req.Method = line[:sp]
	if !isToken(req.Method) {
		return ErrMethod
	}
	line = line[sp+1:]
	sp = bytes.IndexByte(line, ' ')
	if sp <= 0 {
		return ErrRequestLine
	}
	req.Target = line[:sp]
	minor, ok := parseVersion(line[sp+1:])
	if !ok {
		if isVersion(line[sp+1:]) {
			return ErrVersion
		}
		return ErrRequestLine
	}
	req.Minor = minor

	req.Fields, err = parseFields(rest, req.Fields)
	if err != nil {
		return err
	}
	close, keepAlive, upgrade := markHop(req.Fields)
	req.Close = close || (minor == 0 && !keepAlive)

	fr, err := parseFraming(req.Fields)
	if err != nil {
		return err
	}
	if fr.te && minor == 0 {
		return ErrEncodingHTTP10
	}
	req.Chunked = fr.chunked
	switch {
	case fr.chunked:
		req.ContentLength = -1
	case fr.length > 0:
		req.ContentLength = fr.length
	}

	hostSeen := false
	for i := range req.Fields {
		f := &req.Fields[i]
		switch {
		case f.Is("host"):
			if hostSeen {
				return ErrDuplicateHost
			}
			hostSeen = true
			f.Hop = true
			req.Host = f.Value
		case f.Is("upgrade"):
			req.UpgradeProto = f.Value
		case f.Is("expect"):
			if equalFold(f.Value, "100-continue") {
				// An HTTP/1.0 client cannot read a 1xx answer: RFC
				// 9110 section 10.1.1 says to ignore its expectation.
				req.Expect100 = minor == 1
				f.Hop = true
			}
		}
	}
	req.Upgrade = upgrade && len(req.UpgradeProto) > 0 && minor == 1
	if err := req.parseTarget(); err != nil {
		return err
	}
	if !hostSeen && minor == 1 {
		return ErrMissingHost
	}
	if !validHost(req.Host) {
		return ErrBadHost
	}
	return nil
}

// CheckLine checks a request view that another protocol's front door
// built (HTTP/2's pseudo-fields) by the rules a request line and Host
// follow here: the method a token, the target in origin form (or "*" for
// OPTIONS) and the host, if any, a valid authority. Whatever relay
// forwards then goes upstream as a well-formed HTTP/1.1 request line.
func (req *Request) CheckLine() error {
	if !isToken(req.Method) {
		return ErrMethod
	}
	if len(req.Target) == 0 || req.Target[0] != '/' && !(len(req.Target) == 1 && req.Target[0] == '*') {
		return ErrTarget
	}
	if err := req.parseTarget(); err != nil {
		return err
	}
	if len(req.Host) > 0 && !validHost(req.Host) {
		return ErrBadHost
	}
	return nil
}

// parseTarget checks the request target and reduces an absolute-form target
// to origin form. Authority form (CONNECT) is refused: relay does not tunnel.
func (req *Request) parseTarget() error {
	t := req.Target
	for _, c := range t {
		// Any byte outside visible ASCII is invalid in a target.
		if c <= ' ' || c >= 0x7f {
			return ErrTarget
		}
	}
	switch {
	case t[0] == '/':
		if !validPath(t) {
			return ErrTarget
		}
		return nil
	case len(t) == 1 && t[0] == '*':
		if !req.IsMethod("OPTIONS") {
			return ErrTarget
		}
		return nil
	}
	// absolute-form: scheme "://" authority [path-abempty] [ "?" query ]
	i := bytes.Index(t, []byte("://"))
	if i <= 0 || !(equalFold(t[:i], "http") || equalFold(t[:i], "https")) {
		return ErrTarget
	}
	rest := t[i+3:]
	end := bytes.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	auth := rest[:end]
	if bytes.IndexByte(auth, '@') >= 0 || len(auth) == 0 {
		return ErrTarget
	}
	req.Host = auth
	req.Target = rest[end:]
	if len(req.Target) == 0 {
		req.Target = slash
	} else if req.Target[0] == '?' {
		// "http://h?q" has an empty path; origin form needs "/".
		return ErrTarget
	}
	if !validPath(req.Target) {
		return ErrTarget
	}
	return nil
}

// validPath checks the percent-encoding of a target's path, the part
// before any "?": every "%" must start a pct-encoded octet (RFC 3986
// section 2.1). A backend that decodes "%zz" somehow, or refuses it, sees a
// different resource than relay would route on. The query is left alone:
// clients send raw "%" there, and servers take it as data.
func validPath(t []byte) bool {
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case '?':
			return true
		case '%':
			if i+2 >= len(t) || !isHex(t[i+1]) || !isHex(t[i+2]) {
				return false
			}
			i += 2
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

var slash = []byte("/")

// validHost accepts Host = uri-host [ ":" port ] (RFC 9112 section 3.2):
// a reg-name or an IPv6 literal in brackets, then an optional port of
// digits only. An invalid Host must get a 400 (RFC 9112 section 3.2), and
// a lenient reading here would let relay route on one authority while the
// backend sees another. Percent-encoded host names are refused: clients do
// not send them and decoding them is one more place for parsers to differ.
func validHost(h []byte) bool {
	if len(h) > 0 && h[0] == '[' {
		end := bytes.IndexByte(h, ']')
		if end < 0 || !validIPv6(h[1:end]) {
			return false
		}
		h = h[end+1:]
	} else {
		for len(h) > 0 && h[0] != ':' {
			if !regName[h[0]] {
				return false
			}
			h = h[1:]
		}
	}
	if len(h) == 0 {
		return true
	}
	if h[0] != ':' {
		return false
	}
	for _, c := range h[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// validIPv6 checks the inside of an IP literal. IPvFuture and zone
// identifiers are refused; no client sends them in a Host.
func validIPv6(b []byte) bool {
	if len(b) < 2 || len(b) > 45 {
		return false
	}
	for _, c := range b {
		if !isHex(c) && c != ':' && c != '.' {
			return false
		}
	}
	// Only text made of these characters reaches the full parse, so the
	// conversion stays small and is paid only by IPv6 literals.
	a, err := netip.ParseAddr(string(b))
	return err == nil && a.Is6()
}

// regName marks the characters of a reg-name without percent-encoding:
// unreserved and sub-delims (RFC 3986 section 3.2.2).
var regName = [256]bool{}

func init() {
	for c := 'a'; c <= 'z'; c++ {
		regName[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		regName[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		regName[c] = true
	}
	for _, c := range "-._~!$&'()*+,;=" {
		regName[c] = true
	}
}

// isVersion reports whether v is an HTTP-version, "HTTP/" DIGIT "." DIGIT,
// supported or not: an unsupported one gets 505, anything else 400.
func isVersion(v []byte) bool {
	return len(v) == 8 && string(v[:5]) == "HTTP/" && '0' <= v[5] && v[5] <= '9' &&
		v[6] == '.' && '0' <= v[7] && v[7] <= '9'
}

// parseVersion accepts exactly HTTP/1.0 and HTTP/1.1.
func parseVersion(v []byte) (minor int, ok bool) {
	if len(v) != 8 || string(v[:7]) != "HTTP/1." {
		return 0, false
	}
	switch v[7] {
	case '0':
		return 0, true
	case '1':
		return 1, true
	}
	return 0, false
}

// cutLine splits off the first line of a head, which must end in CRLF and
// hold no other CR or LF.
func cutLine(head []byte) (line, rest []byte, err error) {
	i := bytes.IndexByte(head, '\n')
	if i < 0 {
		return nil, nil, ErrUnexpectedEOF
	}
	if i == 0 || head[i-1] != '\r' {
		return nil, nil, ErrBareLF
	}
	line = head[:i-1]
	if j := valueEnd(line); j < len(line) {
		if line[j] == '\r' {
			return nil, nil, ErrBareCR
		}
		return nil, nil, ErrRequestLine
	}
	return line, head[i+1:], nil
}

// Detach copies every byte the request refers to into buf, reusing its
// memory, and points the request at the copy, so it stays valid while the
// Reader's buffer is reused: a server that reads a whole body before it is
// done with the head calls it first. It returns the buffer for reuse.
func (r *Request) Detach(buf []byte) []byte {
	n := len(r.Method) + len(r.Target) + len(r.Host) + len(r.UpgradeProto)
	for i := range r.Fields {
		n += len(r.Fields[i].Name) + len(r.Fields[i].Value)
	}
	if cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	buf = buf[:0]
	// Every append stays within buf's capacity, so earlier copies are
	// never moved by a later one.
	move := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		at := len(buf)
		buf = append(buf, b...)
		return buf[at:len(buf):len(buf)]
	}
	r.Method, r.Target, r.Host, r.UpgradeProto = move(r.Method), move(r.Target), move(r.Host), move(r.UpgradeProto)
	for i := range r.Fields {
		r.Fields[i].Name, r.Fields[i].Value = move(r.Fields[i].Name), move(r.Fields[i].Value)
	}
	return buf
}
