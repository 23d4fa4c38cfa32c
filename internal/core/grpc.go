package core

import (
	"bytes"
	"strconv"
	"time"

	"relay/internal/h1"
)

// gRPC rides on HTTP/2 and ends every call with trailers: grpc-status
// (0 is OK) and grpc-message. relay recognises a gRPC request by its
// content-type, application/grpc or application/grpc+FORMAT, and for one:
//
//   - answers its own errors the way a gRPC client reads them: HTTP 200
//     with grpc-status and grpc-message in a head that ends the stream (a
//     "trailers-only" response), as Envoy does, never an HTML 503;
//   - bounds the call by the client's grpc-timeout, capped by the pool's
//     MaxGRPCTimeout;
//   - reports the grpc-status the call ended with (Outcome.GRPCStatus),
//     and counts the statuses in the pool's BreakerGRPCStatuses as
//     failures on the backend's breaker.

// gRPC status codes relay answers with itself.
const (
	grpcOK                = 0
	grpcUnknown           = 2
	grpcInternal          = 13
	grpcDeadlineExceeded  = 4
	grpcNotFound          = 5
	grpcPermissionDenied  = 7
	grpcResourceExhausted = 8
	grpcUnimplemented     = 12
	grpcUnavailable       = 14
	grpcUnauthenticated   = 16
)

// grpcCodes are the text of the status codes 0..16, so that reporting a
// status takes no allocation.
var grpcCodes = [...]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16"}

// grpcCodeOf maps relay's own HTTP error status to the gRPC status a
// client is answered with. The mapping is gRPC's for HTTP statuses
// (doc/http-grpc-status-mapping.md in the gRPC repository), except where
// relay knows more: a deadline that passed is DEADLINE_EXCEEDED, and a
// request refused for want of room (a full queue, a rate limit, a body
// too large) is RESOURCE_EXHAUSTED.
func grpcCodeOf(status int, exhausted bool) int {
	if exhausted {
		return grpcResourceExhausted
	}
	switch status {
	case 400, 431:
		return grpcInternal
	case 401:
		return grpcUnauthenticated
	case 403:
		return grpcPermissionDenied
	case 404:
		return grpcUnimplemented
	case 408, 504:
		return grpcDeadlineExceeded
	case 413, 429:
		return grpcResourceExhausted
	case 502, 503, 508:
		return grpcUnavailable
	}
	return grpcUnknown
}

var (
	contentTypeField = []byte("content-type")
	grpcStatusField  = []byte("grpc-status")
	grpcMessageField = []byte("grpc-message")
	grpcContentType  = []byte("application/grpc")
)

// isGRPC reports whether a content-type value is gRPC's:
// application/grpc, alone or followed by "+format" or parameters.
func isGRPC(v []byte) bool {
	if len(v) < len(grpcContentType) || !bytes.EqualFold(v[:len(grpcContentType)], grpcContentType) {
		return false
	}
	rest := v[len(grpcContentType):]
	return len(rest) == 0 || rest[0] == '+' || rest[0] == ';'
}

// fieldValue returns the value of the first field named name (lower
// case), and whether there is one.
func fieldValue(fields []h1.Field, name string) ([]byte, bool) {
	for i := range fields {
		if fields[i].Is(name) {
			return fields[i].Value, true
		}
	}
	return nil, false
}

// grpcRequest reports whether the request is a gRPC call.
func (x *Exchange) grpcRequest() bool {
	v, ok := fieldValue(x.Req.Fields, "content-type")
	return ok && isGRPC(v)
}

// grpcStatusText returns the text relay reports for a grpc-status value
// the backend sent: one of grpcCodes for 0..16, so that none is
// allocated, and "other" for anything else.
func grpcStatusText(v []byte) string {
	v = bytes.TrimSpace(v)
	if n, err := strconv.Atoi(string(v)); err == nil && n >= 0 && n < len(grpcCodes) {
		return grpcCodes[n]
	}
	return "other"
}

// grpcStatusOf returns the status a response head or its trailers carry,
// "" when neither does.
func grpcStatusOf(fields []h1.Field) string {
	if v, ok := fieldValue(fields, "grpc-status"); ok {
		return grpcStatusText(v)
	}
	return ""
}

// grpcStatusInLines returns the grpc-status in trailer lines as
// HTTP/1.1 writes them ("grpc-status: 0\r\n"), "" when there is none.
func grpcStatusInLines(lines []byte) string {
	for len(lines) > 0 {
		line := lines
		if i := bytes.IndexByte(lines, '\n'); i >= 0 {
			line, lines = lines[:i], lines[i+1:]
		} else {
			lines = nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && bytes.EqualFold(bytes.TrimSpace(name), grpcStatusField) {
			return grpcStatusText(bytes.TrimSpace(value))
		}
	}
	return ""
}

// grpcError answers a gRPC request with relay's own error: a head with
// status 200, content-type application/grpc, grpc-status and
// grpc-message, and no body, which ends the stream.
func (x *Exchange) grpcError(status int, msg string, exhausted bool) Outcome {
	code := grpcCodeOf(status, exhausted)
	b := append(x.limitBuf[:0], grpcCodes[code]...)
	k := len(b)
	b = appendGRPCMessage(b, h1.StatusText(status)+": "+msg)
	x.limitBuf = b
	resp := &x.resp
	resp.Minor, resp.Status, resp.Reason = 1, 200, nil
	resp.Fields = append(resp.Fields[:0],
		h1.Field{Name: contentTypeField, Value: grpcContentType},
		h1.Field{Name: grpcStatusField, Value: b[:k]},
		h1.Field{Name: grpcMessageField, Value: b[k:]})
	resp.Body, resp.ContentLength, resp.Close = h1.BodyNone, 0, false
	if len(x.rid) > 0 {
		x.answerWithID(resp)
	}
	x.respBody.empty()
	n, _, _ := x.Door.Respond(resp, &x.respBody)
	// The log and metrics keep relay's HTTP status, as for other
	// requests; the gRPC status says what the client read.
	return Outcome{Status: status, Out: n, GRPCStatus: grpcCodes[code]}
}

// appendGRPCMessage appends msg percent-encoded as grpc-message requires:
// bytes outside printable ASCII, and '%', as %XX.
func appendGRPCMessage(b []byte, msg string) []byte {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			b = append(b, '%', hex[c>>4], hex[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}

// answerError answers with relay's own error: gRPC-shaped for a gRPC
// request, the door's plain error otherwise.
func (x *Exchange) answerError(status int, msg string, exhausted bool) Outcome {
	if x.grpcRequest() {
		return x.grpcError(status, msg, exhausted)
	}
	n, _ := x.Door.Error(status, msg)
	return Outcome{Status: status, Out: n}
}

// grpcTimeout parses a grpc-timeout value: at most 8 digits and a unit,
// H, M, S, m (milliseconds), u (microseconds) or n (nanoseconds). ok is
// false for a value that is not one.
func grpcTimeout(v []byte) (d time.Duration, ok bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	var n int64
	for _, c := range v[:len(v)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// callDeadline returns when a gRPC call must end: the client's
// grpc-timeout from start, capped by max; zero when neither bounds it.
func (x *Exchange) callDeadline(start time.Time, max time.Duration) time.Time {
	d := max
	if v, ok := fieldValue(x.Req.Fields, "grpc-timeout"); ok {
		if t, ok := grpcTimeout(v); ok && (d <= 0 || t < d) {
			d = t
		}
	}
	if d <= 0 {
		return time.Time{}
	}
	return start.Add(d)
}
