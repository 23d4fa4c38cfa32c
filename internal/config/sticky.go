package config

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Sticky binds a client to the backend that first answered it, by a
// cookie relay sets: HAProxy's "cookie NAME insert", Traefik's sticky
// cookies. Sticky sessions are on when Cookie is set.
type Sticky struct {
	// Cookie is the cookie's name; "" (the default) turns sticky sessions
	// off.
	Cookie string
	// Path is the cookie's Path attribute.
	Path string
	// MaxAge is the cookie's Max-Age; 0 makes it a session cookie, gone
	// when the browser closes.
	MaxAge time.Duration
	// HTTPOnly keeps the cookie from scripts.
	HTTPOnly bool
	// Secure is StickySecureAuto (Secure on requests that came over TLS),
	// "true" or "false".
	Secure string
	// SameSite is "lax", "strict", "none", or "" for no attribute.
	SameSite string
	// Key is the secret the cookie's value is made with (an HMAC of the
	// pool and backend names); "" has relay make one when it starts, the
	// same in every process. Instances that must honour each other's
	// cookies share one, of at least MinStickyKeyLen bytes.
	Key string
	// Indirect keeps the cookie from the backends: relay removes it from
	// the request's Cookie fields (HAProxy's "indirect").
	Indirect bool
	// NoCache adds Cache-Control: private to a response that sets the
	// cookie, so a shared cache does not hand one client's cookie to
	// another (HAProxy's "nocache").
	NoCache bool
}

// Sticky defaults and bounds.
const (
	StickySecureAuto      = "auto"
	DefaultStickyPath     = "/"
	DefaultStickySameSite = "lax"
	MinStickyKeyLen       = 16
)

var stickyKeys = []string{"cookie", "path", "max_age", "http_only", "secure", "same_site", "key", "indirect", "nocache"}

// On reports whether sticky sessions are on.
func (s Sticky) On() bool { return s.Cookie != "" }

func defaultSticky() Sticky {
	return Sticky{Path: DefaultStickyPath, HTTPOnly: true, Secure: StickySecureAuto, SameSite: DefaultStickySameSite}
}

// decodeSticky reads a sticky section. Its settings depend on no other
// key, so they are judged here, where each one's line is known.
func decodeSticky(d *decoder, p *Pool, v *yaml.Node, path string) {
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, path, "must be a mapping (sticky:\n  cookie: NAME), got %s", describe(v))
		return
	}
	s := defaultSticky()
	at := path + "."
	cookieSet, sameSiteLine := false, v.Line
	d.mapping(v, at, stickyKeys, func(key string, k, val *yaml.Node) {
		switch key {
		case "cookie":
			cookieSet = true
			if c, ok := d.str(val, at+key); ok {
				if msg := checkCookieName(c); c != "" && msg != "" {
					d.problem(val.Line, at+key, "%s", msg)
				}
				s.Cookie = c
			}
		case "path":
			if c, ok := d.str(val, at+key); ok {
				if msg := checkCookiePath(c); msg != "" {
					d.problem(val.Line, at+key, "%s", msg)
				}
				s.Path = c
			}
		case "max_age":
			if t, ok := d.duration(val, at+key); ok {
				switch {
				case t < 0:
					d.problem(val.Line, at+key, "must not be negative, got %v (0 makes a session cookie)", t)
				case t > 0 && t < time.Second:
					d.problem(val.Line, at+key, "Max-Age counts whole seconds; %v would be 0, a session cookie: give at least 1s, or 0", t)
				}
				s.MaxAge = t
			}
		case "http_only":
			if b, ok := d.boolean(val, at+key); ok {
				s.HTTPOnly = b
			}
		case "secure":
			// true and false read as booleans in YAML, auto as a string.
			if val.Kind == yaml.ScalarNode && (val.Value == "auto" || val.Value == "true" || val.Value == "false") {
				s.Secure = val.Value
			} else {
				d.problem(val.Line, at+key, "must be auto (Secure on requests that came over TLS), true or false, got %s", describe(val))
			}
		case "same_site":
			sameSiteLine = k.Line
			if c, ok := d.str(val, at+key); ok {
				c = strings.ToLower(c)
				if c != "lax" && c != "strict" && c != "none" && c != "" {
					d.problem(val.Line, at+key, `must be lax, strict, none or "" (no SameSite attribute), got %s%s`, quote(c), didYouMean(c, []string{"lax", "strict", "none"}))
				}
				s.SameSite = c
			}
		case "key":
			if c, ok := d.str(val, at+key); ok {
				if c != "" && len(c) < MinStickyKeyLen {
					d.problem(val.Line, at+key, "is %d bytes; a key must have at least %d (or leave it out: relay makes one at start, shared by its processes)", len(c), MinStickyKeyLen)
				}
				s.Key = c
			}
		case "indirect":
			if b, ok := d.boolean(val, at+key); ok {
				s.Indirect = b
			}
		case "nocache":
			if b, ok := d.boolean(val, at+key); ok {
				s.NoCache = b
			}
		}
	})
	if !cookieSet {
		d.problem(v.Line, at+"cookie", `missing: name the cookie that binds a client to its backend, for example cookie: SRV ("" turns sticky sessions off)`)
	}
	if s.SameSite == "none" && s.Secure == "false" {
		d.problem(sameSiteLine, at+"same_site", "none with secure: false: browsers refuse such a cookie; set secure to auto or true")
	}
	p.Sticky = s
}

// checkCookieName says what is wrong with name as a cookie's name (an
// RFC 6265 token), or returns "".
func checkCookieName(name string) string {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?={}`, c) >= 0 {
			return fmt.Sprintf("%s is not a cookie name: %q is not allowed in one (letters, digits and !#$%%&'*+-.^_`|~)", quote(name), c)
		}
	}
	return ""
}

// checkCookiePath says what is wrong with p as a cookie's Path, or "".
func checkCookiePath(p string) string {
	if !strings.HasPrefix(p, "/") {
		return fmt.Sprintf("must start with /, got %s", quote(p))
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < ' ' || c == 0x7f || c == ';' {
			return fmt.Sprintf("%s holds %q, which cannot stand in a cookie's Path", quote(p), c)
		}
	}
	return ""
}
