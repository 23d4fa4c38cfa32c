package logging

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// lineFormatter turns entries into JSON lines. It remembers the formatted
// date, time of day and zone of the last second it saw, because consecutive
// requests almost always start in the same second and formatting a time is
// the dearest part of a line. It is not safe for concurrent use; AccessLog
// guards its one with the same lock as the buffer.
type lineFormatter struct {
	format Format
	sec    int64          // Unix second cached in date and zone
	loc    *time.Location // location cached in date and zone; nil before the first line
	date   []byte         // "2006-01-02T15:04:05" for sec in loc
	zone   []byte         // "Z07:00" for sec in loc
	clf    clfTime        // the combined format's time, cached alike
}

// Format is the form of the access log's lines.
type Format uint8

const (
	// JSON lines, as relay's process log writes them (the default).
	JSON Format = iota
	// Combined is nginx's "combined" format (the NCSA combined log
	// format) followed by relay's own fields; see appendCombined.
	Combined
)

// ParseFormat turns a configured access_log_format into a Format.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "json":
		return JSON, nil
	case "combined":
		return Combined, nil
	}
	return 0, fmt.Errorf("access log format %q: want json or combined", s)
}

// appendLine appends e as one line in the formatter's format.
func (f *lineFormatter) appendLine(b []byte, e *Entry) []byte {
	if f.format == Combined {
		return f.appendCombined(b, e)
	}
	return f.appendEntry(b, e)
}

// appendEntry appends e as one JSON line, byte for byte what slog's JSON
// handler would print for the same record with the same attributes, so one
// parser reads both logs. It is written by hand because the access log runs
// once per request: no reflection, no fmt, no allocation.
func (f *lineFormatter) appendEntry(b []byte, e *Entry) []byte {
	b = append(b, `{"time":"`...)
	b = f.appendTime(b, e.Time)
	b = append(b, `","level":"INFO","msg":"access","client":`...)
	b = appendAddrPort(b, e)
	b = append(b, `,"method":`...)
	b = appendJSONString(b, e.Method)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, e.Path)
	b = append(b, `,"proto":`...)
	b = appendJSONString(b, e.Proto)
	b = strconv.AppendBool(append(b, `,"tls":`...), e.TLS)
	b = append(b, `,"status":`...)
	b = appendInt(b, int64(e.Status))
	b = append(b, `,"backend":`...)
	b = appendJSONString(b, e.Backend)
	b = append(b, `,"pool":`...)
	b = appendJSONString(b, e.Pool)
	b = append(b, `,"route":`...)
	b = appendJSONString(b, e.Route)
	b = append(b, `,"duration_ms":`...)
	b = appendMillis(b, e.Duration)
	b = append(b, `,"bytes_in":`...)
	b = appendInt(b, e.BytesIn)
	b = append(b, `,"bytes_out":`...)
	b = appendInt(b, e.BytesOut)
	b = append(b, `,"user_agent":`...)
	b = appendBoundedJSON(b, e.UserAgent)
	b = append(b, `,"referer":`...)
	b = appendBoundedJSON(b, e.Referer)
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, e.RequestID)
	if len(e.TraceID) > 0 {
		b = append(b, `,"trace_id":`...)
		b = appendJSONString(b, e.TraceID)
	}
	if len(e.ClientCertSubject) > 0 {
		b = append(b, `,"client_cert_subject":`...)
		b = appendBoundedJSON(b, e.ClientCertSubject)
	}
	if e.UpstreamConnect >= 0 {
		b = append(b, `,"upstream_connect_ms":`...)
		b = appendMillis(b, e.UpstreamConnect)
	}
	if e.UpstreamResponse >= 0 {
		b = append(b, `,"upstream_response_ms":`...)
		b = appendMillis(b, e.UpstreamResponse)
	}
	if e.GRPCStatus != "" {
		// A string, as the grpc-status field is text: a backend may send
		// what is not a number, and one field should not change type.
		b = append(b, `,"grpc_status":`...)
		b = appendJSONString(b, e.GRPCStatus)
	}
	return append(b, "}\n"...)
}

// appendBoundedJSON appends a client's header value as a JSON string, cut
// at MaxValueBytes and marked when longer.
func appendBoundedJSON(b, v []byte) []byte {
	v, cut := bounded(v)
	if cut {
		v = wholeRunes(v)
	}
	b = appendJSONString(b, v)
	if cut {
		b = append(b[:len(b)-1], TruncatedMark...)
		b = append(b, '"')
	}
	return b
}

// wholeRunes drops from the end of v, a value cut at MaxValueBytes, the
// first bytes of a rune the cut split: in a JSON string they would show
// as replacement characters (U+FFFD) that the client never sent.
func wholeRunes(v []byte) []byte {
	for i := len(v) - 1; i >= 0 && i >= len(v)-utf8.UTFMax; i-- {
		if utf8.RuneStart(v[i]) {
			if !utf8.FullRune(v[i:]) {
				return v[:i]
			}
			break
		}
	}
	return v
}

// appendTime appends t as time.RFC3339Nano does: fractional seconds without
// trailing zeros, and no dot at all on a whole second.
func (f *lineFormatter) appendTime(b []byte, t time.Time) []byte {
	sec, loc := t.Unix(), t.Location()
	if sec != f.sec || loc != f.loc { // Location is never nil, so the first line misses
		// A zone's offset only changes on a whole second, so date and zone
		// are fixed for the rest of this second in this location.
		f.date = t.AppendFormat(f.date[:0], "2006-01-02T15:04:05")
		f.zone = t.AppendFormat(f.zone[:0], "Z07:00")
		f.sec, f.loc = sec, loc
	}
	b = append(b, f.date...)
	if ns := t.Nanosecond(); ns != 0 {
		var digits [9]byte
		for i := len(digits) - 1; i >= 0; i-- {
			digits[i] = byte('0' + ns%10)
			ns /= 10
		}
		n := len(digits)
		for digits[n-1] == '0' {
			n--
		}
		b = append(b, '.')
		b = append(b, digits[:n]...)
	}
	return append(b, f.zone...)
}

// appendInt is strconv.AppendInt with a shortcut for the three-digit numbers
// every line has, status codes above all.
func appendInt(b []byte, n int64) []byte {
	if n >= 100 && n < 1000 {
		return append(b, byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10))
	}
	return strconv.AppendInt(b, n, 10)
}

// appendAddrPort appends the client address as a JSON string, "" when unset.
func appendAddrPort(b []byte, e *Entry) []byte {
	if !e.Client.IsValid() {
		return append(b, `""`...)
	}
	if e.Client.Addr().Zone() != "" {
		// An IPv6 zone is an interface name; it is the only part of an
		// address that could need escaping, and link-local clients are rare
		// enough that the allocation here does not matter.
		return appendJSONString(b, e.Client.String())
	}
	b = append(b, '"')
	b = e.Client.AppendTo(b)
	return append(b, '"')
}

// appendMillis appends d in milliseconds rounded to the microsecond, in the
// shortest form that reads back as the same float64: 1.5, 0.001, 12.
// Building it from integers avoids float formatting and gives the same text
// encoding/json prints for float64(µs)/1000.
func appendMillis(b []byte, d time.Duration) []byte {
	us := d.Round(time.Microsecond) / time.Microsecond
	if us < 0 {
		b = append(b, '-')
		us = -us
	}
	b = strconv.AppendInt(b, int64(us/1000), 10)
	frac := int(us % 1000)
	if frac == 0 {
		return b
	}
	digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for digits[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, digits[:n]...)
}

// appendJSONString appends s as a quoted JSON string, escaping what JSON
// requires (quote, backslash, control characters), replacing each byte of
// invalid UTF-8 with U+FFFD, and escaping U+2028 and U+2029 as slog does
// because JavaScript treats them as line ends. Request paths are whatever a
// client sent, so every one of those cases is reachable.
func appendJSONString[S string | []byte](b []byte, s S) []byte {
	b = append(b, '"')
	clean := 0 // s[clean:i] needs no escaping and is not yet copied
	for i := 0; i < len(s); {
		if i+8 <= len(s) && plain8(uint64(s[i])|uint64(s[i+1])<<8|uint64(s[i+2])<<16|uint64(s[i+3])<<24|
			uint64(s[i+4])<<32|uint64(s[i+5])<<40|uint64(s[i+6])<<48|uint64(s[i+7])<<56) {
			i += 8
			continue
		}
		c := s[i]
		if jsonPlain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[clean:i]...)
			b = appendEscapedASCII(b, c)
			i++
			clean = i
			continue
		}
		// A rune is at most four bytes; converting only those keeps the
		// []byte case on the stack.
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[clean:i]...)
			b = append(b, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			b = append(b, s[clean:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xf])
		} else {
			i += size
			continue
		}
		i += size
		clean = i
	}
	b = append(b, s[clean:]...)
	return append(b, '"')
}

const hexDigits = "0123456789abcdef"

// plain8 reports whether all eight bytes packed in v go into a JSON
// string as they are (jsonPlain), testing them at once: most of a line's
// strings (paths, user agents, ids) need no escaping, and a byte at a
// time is the dearest part of formatting them.
func plain8(v uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// Any byte >= 0x80; with none, (v - 0x20 each) borrows into a byte's
	// high bit exactly where a byte is below 0x20; and a byte equal to
	// the quote or the backslash is a zero byte after the XOR.
	below := (v - 0x20*ones) &^ v
	quote, slash := v^('"'*ones), v^('\\'*ones)
	quote = (quote - ones) &^ quote
	slash = (slash - ones) &^ slash
	return (v|below|quote|slash)&highs == 0
}

// jsonPlain marks the bytes that go into a JSON string as they are: printable
// ASCII other than the quote and the backslash. Everything else takes the
// slower path in appendJSONString. One table lookup per byte is what keeps
// escaping cheap for the ordinary path that needs none.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendEscapedASCII appends the JSON escape for an ASCII byte that cannot
// appear raw in a JSON string, using the short forms where JSON has them.
func appendEscapedASCII(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}
