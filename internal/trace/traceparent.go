// Package trace is relay's W3C Trace Context and span export: it reads and
// writes the traceparent field on the caller's buffers, checks and joins
// tracestate fields without copying them (TraceState), decides sampling
// itself and sends only sampled server spans, as OTLP over gRPC or HTTP,
// from a bounded queue a background goroutine drains. An unsampled request
// costs no allocation: the OpenTelemetry SDK costs several per request even
// when it does not sample, so relay's forwarding core does not use it.
package trace

import "slices"

// TraceID is a W3C trace-id: 16 bytes, never all zero in a valid trace.
type TraceID [16]byte

// SpanID is a W3C parent-id or span id: 8 bytes, never all zero when valid.
type SpanID [8]byte

// IsZero reports whether t is the all-zero id, which W3C Trace Context
// reserves for "no trace".
func (t TraceID) IsZero() bool { return t == TraceID{} }

// IsZero reports whether s is the all-zero id: a span with no parent.
func (s SpanID) IsZero() bool { return s == SpanID{} }

// String is t in 32 lower-case hex digits, for logs and tests.
func (t TraceID) String() string { return string(appendHex(nil, t[:])) }

// String is s in 16 lower-case hex digits, for logs and tests.
func (s SpanID) String() string { return string(appendHex(nil, s[:])) }

// Trace flags of W3C Trace Context.
const (
	// FlagSampled (level 1) says the caller may have recorded its span.
	FlagSampled byte = 0x01
	// FlagRandom (level 2) says the trace id's right-most 7 bytes are
	// random, which lets a sampler downstream rely on them.
	FlagRandom byte = 0x02
)

// Parent is what a request's traceparent said: the trace the request
// belongs to, the caller's span and its flags. Valid is false when the
// field was absent or malformed; relay then starts a new trace.
type Parent struct {
	Trace TraceID
	Span  SpanID
	Flags byte
	Valid bool
}

// Sampled reports the sampled flag (bit 0): whether the caller recorded
// its span, which a parent-based sampler follows.
func (p Parent) Sampled() bool { return p.Flags&FlagSampled != 0 }

// ChildFlags is the flags relay writes in the traceparent it sends on:
// sampled as relay decided; random when relay made the trace id (relay's
// ids are wholly random) or when the caller said so of its own; every other
// bit zero, as W3C Trace Context asks of flags a vendor does not know.
func (p Parent) ChildFlags(sampled bool) byte {
	f := FlagRandom
	if p.Valid {
		f = p.Flags & FlagRandom
	}
	if sampled {
		f |= FlagSampled
	}
	return f
}

// TraceparentLen is the length of a version 00 traceparent, the one relay
// writes.
const TraceparentLen = 55

// ParseTraceparent parses a traceparent field value per W3C Trace Context
// levels 1 and 2. Version 00 is exactly 55 characters,
// "00-<32 hex>-<16 hex>-<2 hex>", all hex lower case. A higher version
// (ff excepted, which is invalid) may be longer: its first 55 characters
// are read as version 00's and must be followed by '-' or the end; of its
// flags only the sampled bit is kept, since the others may mean something
// else there. An all-zero trace id or parent id is invalid. Anything
// malformed gives Valid false, never an error: relay ignores such a field
// and starts a new trace, as the specification asks.
func ParseTraceparent(v []byte) Parent {
	if len(v) < TraceparentLen {
		return Parent{}
	}
	ver, ok := hexByte(v[0], v[1])
	if !ok || ver == 0xff || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return Parent{}
	}
	if ver == 0 && len(v) != TraceparentLen {
		return Parent{}
	}
	if ver != 0 && len(v) > TraceparentLen && v[TraceparentLen] != '-' {
		return Parent{}
	}
	var p Parent
	if !decodeHex(p.Trace[:], v[3:35]) || !decodeHex(p.Span[:], v[36:52]) {
		return Parent{}
	}
	flags, ok := hexByte(v[53], v[54])
	if !ok || p.Trace.IsZero() || p.Span.IsZero() {
		return Parent{}
	}
	if ver != 0 {
		flags &= FlagSampled
	}
	p.Flags, p.Valid = flags, true
	return p
}

// AppendTraceparent appends the version 00 traceparent
// "00-<trace>-<span>-<flags>" to dst, 55 bytes, with no allocation when dst
// has room.
func AppendTraceparent(dst []byte, t TraceID, s SpanID, flags byte) []byte {
	n := len(dst)
	dst = slices.Grow(dst, TraceparentLen)[:n+TraceparentLen]
	p := (*[TraceparentLen]byte)(dst[n:])
	p[0], p[1], p[2] = '0', '0', '-'
	putHex(p[3:35], t[:])
	p[35] = '-'
	putHex(p[36:52], s[:])
	p[52], p[53], p[54] = '-', hexDigits[flags>>4], hexDigits[flags&0xf]
	return dst
}

// putHex writes b in lower-case hex into dst, twice its length.
func putHex(dst, b []byte) {
	_ = dst[2*len(b)-1]
	for i, c := range b {
		dst[2*i], dst[2*i+1] = hexDigits[c>>4], hexDigits[c&0xf]
	}
}

const hexDigits = "0123456789abcdef"

// AppendHex appends t in lower-case hex, as traceparent and the access
// log write it, without allocating.
func (t TraceID) AppendHex(dst []byte) []byte { return appendHex(dst, t[:]) }

// appendHex appends b in lower-case hex.
func appendHex(dst, b []byte) []byte {
	n := len(dst)
	dst = slices.Grow(dst, 2*len(b))[:n+2*len(b)]
	putHex(dst[n:], b)
	return dst
}

// decodeHex fills dst from the lower-case hex src, twice its length.
func decodeHex(dst, src []byte) bool {
	_ = src[2*len(dst)-1]
	bad := byte(0)
	for i := range dst {
		h, l := hexValues[src[2*i]], hexValues[src[2*i+1]]
		dst[i], bad = h<<4|l&0xf, bad|h|l
	}
	return bad < 0x10
}

// hexByte decodes two lower-case hex digits. Upper case is refused: the
// specification allows only lower case, and a field that breaks that was
// not written by a conforming tracer.
func hexByte(hi, lo byte) (byte, bool) {
	h, l := hexValues[hi], hexValues[lo]
	return h<<4 | l&0xf, h|l < 0x10
}

// hexValues maps a lower-case hex digit to its value, anything else to 0xff.
var hexValues = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range 16 {
		t[hexDigits[i]] = byte(i)
	}
	return t
}()
