package core

import (
	"bytes"
	"strconv"
	"time"

	"relay/internal/h1"
)

// StickyCookies is the sticky cookie on the messages of a pool with
// sticky sessions (sticky.go): a feature at the admit phase, where it
// reads the value the request's cookie carries for the pool's pick, at
// the upstream request phase with Indirect, where it takes the cookie out
// of what the backend gets, and at the response head phase, where it sets
// the cookie naming the backend that answered when the request's did not
// name it, and marks that response private with NoCache.
type StickyCookies struct {
	name     []byte // the cookie's name
	attrs    []byte // "; Path=/; Max-Age=60; HttpOnly; SameSite=Lax", as set
	secure   StickySecure
	indirect bool
	nocache  bool
}

// NewStickyCookies returns the feature of the sticky section s; nil when
// sticky sessions are off.
func NewStickyCookies(s Sticky) *StickyCookies {
	if s.Cookie == "" {
		return nil
	}
	c := &StickyCookies{name: []byte(s.Cookie), secure: s.Secure, indirect: s.Indirect, nocache: s.NoCache}
	if s.Path != "" {
		c.attrs = append(append(c.attrs, "; Path="...), s.Path...)
	}
	if secs := int64(s.MaxAge / time.Second); secs > 0 {
		c.attrs = strconv.AppendInt(append(c.attrs, "; Max-Age="...), secs, 10)
	}
	if s.HTTPOnly {
		c.attrs = append(c.attrs, "; HttpOnly"...)
	}
	if s.SameSite != "" {
		c.attrs = append(append(c.attrs, "; SameSite="...), s.SameSite...)
	}
	return c
}

// stickySlot holds a request's stickyState.
var stickySlot = NewSlot()

// stickyState holds the request's sticky value, and the Set-Cookie and
// Cache-Control values a response gets, in buffers the exchange keeps.
// The value is a copy: the Cookie field's bytes are the door's read
// buffer, which a body held before the pick overwrites.
type stickyState struct {
	value, set, cacheControl []byte
}

// FeatureName names the feature for relay -explain.
func (*StickyCookies) FeatureName() string { return "sticky cookie" }

// Admit reads the value of the request's cookie for the pool's pick
// (Exchange.affinity); it never answers the request. Every Cookie field is
// read (HTTP/2 clients may send several, HTTP/1.1 ones should not) and the
// first pair of the cookie's name taken.
func (c *StickyCookies) Admit(x *Exchange, _ time.Time) (Outcome, bool) {
	for i := range x.Req.Fields {
		f := &x.Req.Fields[i]
		if !f.Is("cookie") {
			continue
		}
		if v, ok := cookieValue(f.Value, c.name); ok {
			st := SlotState[stickyState](x, stickySlot)
			st.value = append(st.value[:0], v...)
			x.affinity = st.value
			break
		}
	}
	return Outcome{}, false
}

// UpstreamHead takes the cookie out of the request with Indirect: every
// Cookie field is written without the pairs of the cookie's name, valid
// or not, the other cookies byte for byte and in order, and a field left
// with none is not written (cookie.go). The fields are written here, not
// cut in place: their bytes may be the HTTP/2 decoder's strings, and the
// hash key reads them as sent.
func (c *StickyCookies) UpstreamHead(x *Exchange, out []byte) []byte {
	if !c.indirect {
		return out
	}
	x.keepOutOfTrailers("cookie,")
	for i := range x.Req.Fields {
		if f := &x.Req.Fields[i]; !f.Hop && f.Is("cookie") {
			out = appendCookieWithout(out, f, c.name)
			f.Hop = true
		}
	}
	return out
}

// ResponseHead adds Set-Cookie to the response when the request's cookie
// did not name the backend that answered, so the client comes back to
// it; under NoCache, the response becomes private too.
func (c *StickyCookies) ResponseHead(x *Exchange, resp *h1.Response) {
	b := x.answering
	if b == nil || x.pool == nil {
		return
	}
	v := x.pool.stickyValue(b)
	if v == "" || string(x.affinity) == v {
		return
	}
	st := SlotState[stickyState](x, stickySlot)
	st.set = append(append(append(append(st.set[:0], c.name...), '='), v...), c.attrs...)
	if c.secure == SecureAlways || c.secure == SecureOnTLS && x.Peer.TLS {
		st.set = append(st.set, "; Secure"...)
	}
	resp.Fields = append(resp.Fields, h1.Field{Name: setCookieField, Value: st.set})
	if c.nocache {
		st.cacheControl = markPrivate(resp, st.cacheControl)
	}
}

var setCookieField = []byte("Set-Cookie")

// cookieValue finds the value of the cookie called name in a Cookie
// field's value ("a=1; b=2").
func cookieValue(list, name []byte) ([]byte, bool) {
	for len(list) > 0 {
		var pair []byte
		if i := bytes.IndexByte(list, ';'); i >= 0 {
			pair, list = list[:i], list[i+1:]
		} else {
			pair, list = list, nil
		}
		pair = bytes.TrimLeft(pair, " \t")
		if len(pair) > len(name) && pair[len(name)] == '=' && bytes.Equal(pair[:len(name)], name) {
			v := bytes.TrimRight(pair[len(name)+1:], " \t")
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return nil, false
}
