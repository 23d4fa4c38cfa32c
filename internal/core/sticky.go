package core

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"relay/internal/backend"
	"relay/internal/h1"
)

// Sticky sessions bind a client to the backend that answered it, by a
// cookie relay sets on the response (HAProxy's "cookie NAME insert",
// Traefik's sticky cookies). The cookie's value names the backend by the
// first bytes of an HMAC of the pool's and the backend's names under a
// secret key: a client can keep or drop the value relay gave it, but not
// turn it into another backend's, and a tampered or foreign value names no
// member and is ignored (the request is balanced as if it had none, and
// the response replaces the cookie). Every process of a relay, and every
// instance given the same key, computes the same values.
//
// A request whose cookie names a member goes to it first, without asking
// the picker (so no shared position moves), while the member takes
// sticky clients (backend.TakesSticky: in rotation, or out only because
// it is draining, as HAProxy's drain keeps its persistent clients) and
// has a place under its cap; otherwise the algorithm picks as it would.
// The response carries Set-Cookie whenever the backend that answered is
// not the one the cookie named. The values and the whole Set-Cookie
// field values are made when a snapshot is built, so the request path
// only looks them up.
//
// Two options follow HAProxy's cookie options of the same names.
// Indirect keeps the cookie from the backends: the request is forwarded
// with every pair of the cookie's name taken out of its Cookie fields,
// valid or not, the other cookies byte for byte and in order, and a
// Cookie field left with none is not sent (cookie.go). NoCache marks a
// response that sets the cookie Cache-Control: private, so a shared cache
// in front of relay does not store one client's cookie and hand it to
// others.

// Sticky configures a pool's sticky sessions; they are on when Cookie is
// set.
type Sticky struct {
	// Cookie is the cookie's name, an RFC 6265 token.
	Cookie string
	// Path is the cookie's Path attribute ("" sends none).
	Path string
	// MaxAge is the cookie's Max-Age, in whole seconds; 0 sends none (a
	// session cookie).
	MaxAge time.Duration
	// HTTPOnly sends HttpOnly.
	HTTPOnly bool
	// Secure says when the cookie carries Secure.
	Secure StickySecure
	// SameSite is the SameSite attribute's value ("Lax", "Strict",
	// "None"), or "" for none.
	SameSite string
	// Key is the HMAC key, at least MinStickyKey bytes.
	Key []byte
	// Indirect removes the cookie from requests before they reach the
	// backend.
	Indirect bool
	// NoCache adds Cache-Control: private to a response that sets the
	// cookie.
	NoCache bool
}

// StickySecure says when a sticky cookie carries the Secure attribute.
type StickySecure uint8

// When the Secure attribute is sent.
const (
	SecureOnTLS  StickySecure = iota // on requests that came over TLS
	SecureAlways                     // always
	SecureNever                      // never
)

// MinStickyKey is the shortest sticky-cookie key a pool takes.
const MinStickyKey = 16

// stickyValueBytes is how many bytes of the HMAC name a backend: 64 bits
// make a forged value that names some member of a pool of n about n in
// 2^64, and encode in 11 characters.
const stickyValueBytes = 8

func (s *Sticky) validate() error {
	if s.Cookie == "" {
		return nil
	}
	if len(s.Key) < MinStickyKey {
		return fmt.Errorf("sticky key is %d bytes, below %d", len(s.Key), MinStickyKey)
	}
	if s.MaxAge < 0 {
		return fmt.Errorf("sticky max age %v is negative", s.MaxAge)
	}
	return nil
}

// StickyValue is the cookie value that names backend name of pool under
// key: base64url of the first 8 bytes of HMAC-SHA256(key, pool NUL name).
func StickyValue(key []byte, pool, name string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(pool))
	m.Write([]byte{0})
	m.Write([]byte(name))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:stickyValueBytes])
}

// stickyTable is one snapshot's sticky cookies: the member each value
// names, and each member's Set-Cookie field values, without and with
// Secure.
type stickyTable struct {
	name     []byte // the cookie's name
	members  map[string]*backend.Backend
	set      map[*backend.Backend]*[2][]byte
	secure   StickySecure
	indirect bool // the cookie is kept from the backends
	nocache  bool // a response that sets it is marked private
}

// newStickyTable makes the cookies of members of pool under s; nil when
// sticky sessions are off.
func newStickyTable(s *Sticky, pool string, members []*backend.Backend) *stickyTable {
	if s.Cookie == "" {
		return nil
	}
	t := &stickyTable{name: []byte(s.Cookie), secure: s.Secure, indirect: s.Indirect, nocache: s.NoCache,
		members: make(map[string]*backend.Backend, len(members)),
		set:     make(map[*backend.Backend]*[2][]byte, len(members))}
	var attrs []byte
	if s.Path != "" {
		attrs = append(append(attrs, "; Path="...), s.Path...)
	}
	if secs := int64(s.MaxAge / time.Second); secs > 0 {
		attrs = strconv.AppendInt(append(attrs, "; Max-Age="...), secs, 10)
	}
	if s.HTTPOnly {
		attrs = append(attrs, "; HttpOnly"...)
	}
	if s.SameSite != "" {
		attrs = append(append(attrs, "; SameSite="...), s.SameSite...)
	}
	for _, b := range members {
		v := StickyValue(s.Key, pool, b.Name)
		t.members[v] = b
		plain := append(append(append([]byte(s.Cookie), '='), v...), attrs...)
		t.set[b] = &[2][]byte{plain, append(append([]byte(nil), plain...), "; Secure"...)}
	}
	return t
}

// lookup returns the member the request's cookie names, or nil when it
// carries none, or one that names no member. It reads every Cookie field
// (HTTP/2 clients may send several, HTTP/1.1 ones should not) and takes
// the first pair of the cookie's name.
func (t *stickyTable) lookup(req *h1.Request) *backend.Backend {
	for i := range req.Fields {
		f := &req.Fields[i]
		if !f.Is("cookie") {
			continue
		}
		if v, ok := cookieValue(f.Value, t.name); ok {
			return t.members[string(v)]
		}
	}
	return nil
}

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

// setCookie is the Set-Cookie field value naming b, for a request over
// TLS or not.
func (t *stickyTable) setCookie(b *backend.Backend, tls bool) []byte {
	vs := t.set[b]
	if vs == nil {
		return nil
	}
	if t.secure == SecureAlways || t.secure == SecureOnTLS && tls {
		return vs[1]
	}
	return vs[0]
}

var setCookieField = []byte("Set-Cookie")

// stickyPick takes a place on the member the request's cookie names, when
// it takes sticky clients and has room; it reports whether it did. The
// member is looked up in the passage's snapshot, which a wait renews, so a
// member removed meanwhile is not picked.
func (r *passage) stickyPick() (b *backend.Backend, probe, ok bool) {
	t := r.snap.sticky
	r.x.stickyT, r.x.stickyB = t, nil
	if t == nil {
		return nil, false, false
	}
	b = t.lookup(r.x.Req)
	r.x.stickyB = b
	// A first pick's filter has no backend tried yet, and its
	// availability test would refuse a draining member: it is not asked.
	if b == nil || !b.TakesSticky() {
		return nil, false, false
	}
	ok, probe, full := b.Admit(r.p.limit(b), true)
	r.full = r.full || full
	return b, probe, ok
}

// stickyAnswer adds Set-Cookie to the response of b when the request's
// cookie did not name b, so the client comes back to it; under nocache,
// the response becomes private too.
func (x *Exchange) stickyAnswer(b *backend.Backend, resp *h1.Response) {
	t := x.stickyT
	if t == nil || x.stickyB == b {
		return
	}
	if v := t.setCookie(b, x.Peer.TLS); v != nil {
		resp.Fields = append(resp.Fields, h1.Field{Name: setCookieField, Value: v})
		if t.nocache {
			x.markPrivate(resp)
		}
	}
}
