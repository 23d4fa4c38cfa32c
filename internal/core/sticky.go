package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"

	"relay/internal/backend"
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
// not the one the cookie named. The values are made when a snapshot is
// built, so the request path only looks them up.
//
// The work is split in two. The pool owns the affinity: which member a
// value names, made with the snapshot, and the pick that tries it first
// (this file). The cookie on the messages is a feature, StickyCookies
// (stickycookie.go): it reads the value from the request at the admit
// phase (Exchange.affinity), takes the cookie out of what the backend
// gets with indirect, and sets it on the response with nocache. The data
// plane puts the feature in the lists of the pool and of every route to
// it, from the same sticky section.
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

// stickyTable is one snapshot's sticky values: the member each names,
// and each member's.
type stickyTable struct {
	members map[string]*backend.Backend
	values  map[*backend.Backend]string
}

// newStickyTable makes the values of members of pool under s; nil when
// sticky sessions are off.
func newStickyTable(s *Sticky, pool string, members []*backend.Backend) *stickyTable {
	if s.Cookie == "" {
		return nil
	}
	t := &stickyTable{members: make(map[string]*backend.Backend, len(members)),
		values: make(map[*backend.Backend]string, len(members))}
	for _, b := range members {
		v := StickyValue(s.Key, pool, b.Name)
		t.members[v], t.values[b] = b, v
	}
	return t
}

// stickyValue is the sticky value that names b in the pool as it is now,
// "" when sticky sessions are off or b is no longer a member.
func (p *Pool) stickyValue(b *backend.Backend) string {
	if t := p.state.Load().sticky; t != nil {
		return t.values[b]
	}
	return ""
}

// stickyPick takes a place on the member the request's sticky value
// names (Exchange.affinity), when it takes sticky clients and has room;
// it reports whether it did. The member is looked up in the passage's
// snapshot, which a wait renews, so a member removed meanwhile is not
// picked.
func (r *passage) stickyPick() (b *backend.Backend, probe, ok bool) {
	t := r.snap.sticky
	if t == nil || len(r.x.affinity) == 0 {
		return nil, false, false
	}
	b = t.members[string(r.x.affinity)]
	// A first pick's filter has no backend tried yet, and its
	// availability test would refuse a draining member: it is not asked.
	if b == nil || !b.TakesSticky() {
		return nil, false, false
	}
	ok, probe, full := b.Admit(r.p.limit(b), true)
	r.full = r.full || full
	return b, probe, ok
}
