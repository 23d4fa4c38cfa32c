package trace

import (
	"time"
	"unicode/utf8"
	"unsafe"
)

// record is a span as it waits in the exporter's queue: fixed fields and
// the bytes of every string in one buffer of its own. Records are made
// once and reused, so that Export allocates nothing once the queue has
// been as long as it gets; a record whose buffer grew past recordBufKeep
// lets it go when it is reused.
type record struct {
	trace  TraceID
	id     SpanID
	parent SpanID
	flags  byte
	kind   Kind

	start, end int64 // Unix nanoseconds; 0 for a zero time
	status     int
	retries    int
	grpc       int // -1: not a gRPC call
	serverPort int // 0: none
	clientPort int

	str     [nStr]strRef
	events  [MaxEvents]eventRecord
	nEvents int
	dropped int // events past MaxEvents

	buf []byte
}

// Indexes of a record's strings.
const (
	strName = iota
	strMethod
	strMethodOriginal // set when the method is not a registered one
	strPath
	strServerAddr
	strScheme
	strProtoVersion
	strRoute
	strPool
	strBackend
	strRequestID
	strClientAddr
	strTraceState
	nStr
)

// strRef is a string in a record's buffer.
type strRef struct{ off, n int32 }

type eventRecord struct {
	time            int64
	backend, reason strRef
}

// recordBufKeep is the most string bytes a record keeps between spans.
const recordBufKeep = 4 << 10

// fill copies s into r. It allocates only when r's buffer must grow.
func (r *record) fill(s *Span) {
	if cap(r.buf) > recordBufKeep {
		r.buf = nil
	}
	r.buf = r.buf[:0]
	r.trace, r.id, r.parent, r.kind = s.Trace, s.ID, s.Parent, s.Kind
	r.flags = s.Flags | FlagSampled // only sampled spans are exported
	r.start, r.end = unixNano(s.Start), unixNano(s.End)
	r.status, r.retries = s.Status, s.Retries
	r.grpc = parseGRPCStatus(s.GRPCStatus)

	method, original := s.Method, ""
	if !knownMethod(method) {
		method, original = "_OTHER", s.Method
	}
	if s.Name != "" {
		r.str[strName] = r.add(s.Name)
	} else {
		// OpenTelemetry names a span of an unknown method "HTTP".
		start := len(r.buf)
		if original != "" {
			r.addRaw("HTTP")
		} else {
			r.addRaw(method)
		}
		if s.Route != "" {
			r.addRaw(" ")
			r.addRaw(s.Route)
		}
		r.str[strName] = strRef{int32(start), int32(len(r.buf) - start)}
	}
	r.str[strMethod] = r.add(method)
	r.str[strMethodOriginal] = r.add(original)
	r.str[strPath] = r.add(pathOf(s.Target))
	host, port := splitHostPort(s.Host)
	r.str[strServerAddr], r.serverPort = r.add(host), port
	r.str[strScheme] = r.add(s.Scheme)
	r.str[strProtoVersion] = r.add(protoVersion(s.Proto))
	r.str[strRoute] = r.add(s.Route)
	r.str[strPool] = r.add(s.Pool)
	r.str[strBackend] = r.add(s.Backend)
	r.str[strRequestID] = r.add(s.RequestID)
	client, cport := splitHostPort(s.ClientAddr)
	r.str[strClientAddr], r.clientPort = r.add(client), cport
	r.str[strTraceState] = strRef{}
	if len(s.TraceState) <= maxTraceState {
		r.str[strTraceState] = r.add(unsafe.String(unsafe.SliceData(s.TraceState), len(s.TraceState)))
	}

	r.nEvents = min(len(s.Events), MaxEvents)
	r.dropped = len(s.Events) - r.nEvents
	for i, ev := range s.Events[:r.nEvents] {
		r.events[i] = eventRecord{time: unixNano(ev.Time), backend: r.add(ev.Backend), reason: r.add(ev.Reason)}
	}
}

// add copies v into r's buffer, cut to MaxValueLen and with any byte that
// is not UTF-8 replaced by '?': OTLP strings must be valid UTF-8, or the
// whole batch fails to encode, and a client chooses the bytes of its path
// and Host.
func (r *record) add(v string) strRef {
	if v == "" {
		return strRef{}
	}
	if len(v) > MaxValueLen {
		n := MaxValueLen
		for n > 0 && !utf8.RuneStart(v[n]) {
			n--
		}
		v = v[:n]
	}
	start := len(r.buf)
	if isASCII(v) {
		r.buf = append(r.buf, v...)
	} else {
		for len(v) > 0 {
			c, size := utf8.DecodeRuneInString(v)
			if c == utf8.RuneError && size <= 1 {
				r.buf = append(r.buf, '?')
			} else {
				r.buf = append(r.buf, v[:size]...)
			}
			v = v[size:]
		}
	}
	return strRef{int32(start), int32(len(r.buf) - start)}
}

// addRaw appends v as a part of a string built from parts, which the
// caller measures itself.
func (r *record) addRaw(v string) { r.add(v) }

// get is the string ref names. It shares r's buffer, which stays as it is
// until r is filled again: the batch that holds r is encoded and sent by
// then.
func (r *record) get(ref strRef) string {
	if ref.n == 0 {
		return ""
	}
	return unsafe.String(&r.buf[ref.off], int(ref.n))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// knownMethod reports whether m is one of the methods OpenTelemetry's HTTP
// conventions name (RFC 9110's and PATCH); others are "_OTHER", so that a
// client cannot make the method attribute take any value it likes.
func knownMethod(m string) bool {
	switch m {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "QUERY":
		return true
	}
	return false
}

// pathOf is the path of a request target: the query and any fragment are
// left out.
func pathOf(target string) string {
	for i := 0; i < len(target); i++ {
		if target[i] == '?' || target[i] == '#' {
			return target[:i]
		}
	}
	return target
}

// protoVersion is network.protocol.version for a protocol name: "1.1" for
// "HTTP/1.1", "2" for "HTTP/2" and for "HTTP/2.0", which relay's HTTP/2
// door calls itself (the access log's name): OpenTelemetry's conventions
// write HTTP/2 and HTTP/3 as "2" and "3".
func protoVersion(p string) string {
	if len(p) > 5 && p[:5] == "HTTP/" {
		p = p[5:]
	}
	switch p {
	case "2.0":
		return "2"
	case "3.0":
		return "3"
	}
	return p
}

// splitHostPort splits "host:port", "[v6]:port", "host", "v6" or "[v6]"
// into the host and the port (0 when there is none or it is not a port).
func splitHostPort(hp string) (string, int) {
	if len(hp) > 0 && hp[0] == '[' {
		end := -1
		for i := 1; i < len(hp); i++ {
			if hp[i] == ']' {
				end = i
				break
			}
		}
		if end < 0 {
			return hp, 0
		}
		if end+1 < len(hp) && hp[end+1] == ':' {
			return hp[1:end], parsePort(hp[end+2:])
		}
		return hp[1:end], 0
	}
	colon := -1
	for i := 0; i < len(hp); i++ {
		if hp[i] == ':' {
			if colon >= 0 {
				return hp, 0 // a bare IPv6 address
			}
			colon = i
		}
	}
	if colon < 0 {
		return hp, 0
	}
	return hp[:colon], parsePort(hp[colon+1:])
}

// parsePort is a decimal port from 1 to 65535, or 0.
func parsePort(s string) int {
	n := parseSmall(s)
	if n < 1 || n > 65535 {
		return 0
	}
	return n
}

// parseGRPCStatus is a grpc-status value as a number, or -1.
func parseGRPCStatus(s string) int {
	if s == "" {
		return -1
	}
	return parseSmall(s)
}

// parseSmall parses up to 5 decimal digits; -1 for anything else.
func parseSmall(s string) int {
	if len(s) == 0 || len(s) > 5 {
		return -1
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}
