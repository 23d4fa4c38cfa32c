package logging

import (
	"time"
)

// appendCombined appends e as one line of nginx's "combined" format,
//
//	$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"
//
// which log analysers (GoAccess, AWStats, most of those that read Apache's
// or nginx's logs) know, followed by relay's own fields as nginx users
// append theirs, name=value:
//
//	rid="$request_id" upstream="$backend" pool="$pool" route="$route" rt=$request_time uct=$upstream_connect_time urt=$upstream_response_time
//
// with, after rid, trace="$trace_id" when tracing is on and then
// client_cert_subject="$ssl_client_s_dn" for a client with a verified
// certificate, and, for a gRPC response only, grpc_status="$grpc_status" (the field
// nginx users log as $upstream_trailer_grpc_status): a line of any other
// request keeps the fixed fields above, which parsers written for them
// expect, as the JSON line leaves the field out.
//
// Times are in seconds with millisecond resolution, as nginx writes them;
// "-" stands for a value that does not exist (no user, no referer, no
// backend tried, no response head). relay does no authentication, so
// $remote_user is always "-".
//
// Everything a client chose (the request line, referer, user agent, a
// trusted proxy's request id) is escaped as nginx escapes it: a quote, a
// backslash, control bytes and bytes past ASCII become \xHH, so that no
// client can end a field or a line early and forge what follows.
func (f *lineFormatter) appendCombined(b []byte, e *Entry) []byte {
	b = appendCLFAddr(b, e)
	b = append(b, " - - ["...)
	b = f.clf.append(b, e.Time)
	b = append(b, `] "`...)
	if len(e.Method) == 0 {
		b = append(b, '-')
	} else {
		b = appendCLFEscaped(b, e.Method)
		b = append(b, ' ')
		b = appendCLFEscaped(b, e.Path)
		b = append(b, ' ')
		b = appendCLFEscaped(b, e.Proto)
	}
	b = append(b, `" `...)
	b = appendInt(b, int64(e.Status))
	b = append(b, ' ')
	b = appendInt(b, e.BytesOut)
	b = append(b, ' ')
	b = appendCLFBounded(b, e.Referer)
	b = append(b, ' ')
	b = appendCLFBounded(b, e.UserAgent)
	b = append(b, " rid="...)
	b = appendCLFQuoted(b, e.RequestID)
	if len(e.TraceID) > 0 {
		b = append(b, " trace="...)
		b = appendCLFQuoted(b, e.TraceID)
	}
	if len(e.ClientCertSubject) > 0 {
		b = append(b, " client_cert_subject="...)
		b = appendCLFBounded(b, e.ClientCertSubject)
	}
	b = append(b, " upstream="...)
	b = appendCLFQuoted(b, e.Backend)
	b = append(b, " pool="...)
	b = appendCLFQuoted(b, e.Pool)
	b = append(b, " route="...)
	b = appendCLFQuoted(b, e.Route)
	b = append(b, " rt="...)
	b = appendSeconds(b, e.Duration)
	b = append(b, " uct="...)
	b = appendSeconds(b, e.UpstreamConnect)
	b = append(b, " urt="...)
	b = appendSeconds(b, e.UpstreamResponse)
	if e.GRPCStatus != "" {
		// Quoted and escaped: the value is the backend's text.
		b = append(b, " grpc_status="...)
		b = appendCLFQuoted(b, e.GRPCStatus)
	}
	return append(b, '\n')
}

// appendCLFAddr appends the client's address without its port, "-" when
// unset.
func appendCLFAddr(b []byte, e *Entry) []byte {
	if !e.Client.IsValid() {
		return append(b, '-')
	}
	a := e.Client.Addr()
	if a.Zone() != "" {
		// A zone is an interface name, the one part of an address that
		// could need escaping; link-local clients are rare.
		return appendCLFEscaped(b, a.String())
	}
	return a.AppendTo(b)
}

// appendCLFQuoted appends s in quotes, escaped; "-" when empty.
func appendCLFQuoted[S string | []byte](b []byte, s S) []byte {
	if len(s) == 0 {
		return append(b, `"-"`...)
	}
	b = append(b, '"')
	b = appendCLFEscaped(b, s)
	return append(b, '"')
}

// appendCLFBounded appends a client's header value as appendCLFQuoted
// does, cut at MaxValueBytes and marked when longer.
func appendCLFBounded(b, v []byte) []byte {
	v, cut := bounded(v)
	b = appendCLFQuoted(b, v)
	if cut {
		b = append(b[:len(b)-1], TruncatedMark...)
		b = append(b, '"')
	}
	return b
}

// appendCLFEscaped appends s with every byte outside printable ASCII, the
// quote and the backslash written \xHH, as nginx's default escaping does.
func appendCLFEscaped[S string | []byte](b []byte, s S) []byte {
	clean := 0 // s[clean:i] needs no escaping and is not yet copied
	for i := 0; i < len(s); i++ {
		c := s[i]
		if clfPlain[c] {
			continue
		}
		b = append(b, s[clean:i]...)
		b = append(b, '\\', 'x', upperHex[c>>4], upperHex[c&0xf])
		clean = i + 1
	}
	return append(b, s[clean:]...)
}

const upperHex = "0123456789ABCDEF"

// clfPlain marks the bytes a combined line holds as they are.
var clfPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendSeconds appends d in seconds with three decimals (0.012), as nginx
// writes its times; "-" when d is negative (the step did not happen).
func appendSeconds(b []byte, d time.Duration) []byte {
	if d < 0 {
		return append(b, '-')
	}
	ms := d.Round(time.Millisecond) / time.Millisecond
	b = appendInt(b, int64(ms/1000))
	frac := int(ms % 1000)
	return append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
}

// clfTime caches the formatted time of the last second seen, as
// lineFormatter does for JSON: "10/Oct/2000:13:55:36 -0700".
type clfTime struct {
	sec  int64
	loc  *time.Location // nil before the first line
	text []byte
}

func (c *clfTime) append(b []byte, t time.Time) []byte {
	if sec, loc := t.Unix(), t.Location(); sec != c.sec || loc != c.loc {
		c.text = t.AppendFormat(c.text[:0], "02/Jan/2006:15:04:05 -0700")
		c.sec, c.loc = sec, loc
	}
	return append(b, c.text...)
}
