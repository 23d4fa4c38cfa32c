package core

import (
	"bytes"

	"relay/internal/h1"
)

// What a sticky pool's options change on the way (StickyCookies): the
// cookie taken out of the request (indirect) and the response that sets
// it marked private (nocache). Both write into buffers the exchange
// keeps, so the request path allocates nothing.

var semicolon = []byte{';'}

// appendCookieWithout appends Cookie field f without the pairs called
// name. Every other pair is written as it came, with the separator and
// spaces that came before it, so "a=1; SRV=x; b=2" goes on as
// "a=1; b=2". A field with nothing left is not written at all: an empty
// Cookie field is not one a client would send.
func appendCookieWithout(dst []byte, f *h1.Field, name []byte) []byte {
	start := len(dst)
	dst = append(append(dst, f.Name...), ':', ' ')
	at := len(dst)
	removed := false
	rest, more := f.Value, true
	for more {
		var pair []byte
		pair, rest, more = bytes.Cut(rest, semicolon)
		if cookieNamed(pair, name) {
			removed = true
			continue
		}
		if len(dst) == at {
			pair = bytes.TrimLeft(pair, " \t")
		} else {
			dst = append(dst, ';')
		}
		dst = append(dst, pair...)
	}
	if !removed {
		// Not there: the field goes on exactly as it came.
		return h1.AppendField(dst[:start], f.Name, f.Value)
	}
	v := bytes.TrimRight(dst[at:], " \t")
	if len(bytes.Trim(v, " \t;")) == 0 {
		return dst[:start]
	}
	return append(dst[:at+len(v)], '\r', '\n')
}

// cookieNamed reports whether pair, one element of a Cookie field
// ("NAME=VALUE" with spaces around), is called name. Spaces around the
// name are ignored, as lenient servers ignore them, so that no spelling
// of the cookie slips through to the backend; a pair without "=" is
// taken as a name.
func cookieNamed(pair, name []byte) bool {
	if i := bytes.IndexByte(pair, '='); i >= 0 {
		pair = pair[:i]
	}
	return bytes.Equal(bytes.Trim(pair, " \t"), name)
}

var (
	cacheControlField = []byte("Cache-Control")
	privateValue      = []byte("private")
)

// markPrivate makes resp private to the client (Cache-Control: private),
// so no shared cache stores it: it adds private to the first
// Cache-Control field, or adds the field, unless the response already
// says private or no-store. A merged value is written into buf, which it
// returns for the next response.
func markPrivate(resp *h1.Response, buf []byte) []byte {
	first := -1
	for i := range resp.Fields {
		f := &resp.Fields[i]
		if f.Hop || !f.Is("cache-control") {
			continue
		}
		if hasDirective(f.Value, "private") || hasDirective(f.Value, "no-store") {
			return buf
		}
		if first < 0 {
			first = i
		}
	}
	if first < 0 {
		resp.Fields = append(resp.Fields, h1.Field{Name: cacheControlField, Value: privateValue})
		return buf
	}
	// The field's bytes are the backend's response buffer or a route's
	// setting: the merged value is written into buf.
	f := &resp.Fields[first]
	v := append(buf[:0], f.Value...)
	if len(bytes.Trim(v, " \t,")) > 0 {
		v = append(v, ", "...)
	}
	v = append(v, privateValue...)
	f.Value = v
	return v
}

// hasDirective reports whether the Cache-Control list holds directive
// name without an argument (private="Set-Cookie" keeps only the fields it
// names from shared caches: it does not make the response private).
// Arguments are skipped whole, quoted strings included, so a directive's
// name inside one is not taken for a directive.
func hasDirective(list []byte, name string) bool {
	i := 0
	for i < len(list) {
		for i < len(list) && (list[i] == ' ' || list[i] == '\t' || list[i] == ',') {
			i++
		}
		start := i
		for i < len(list) && list[i] != '=' && list[i] != ',' && list[i] != ' ' && list[i] != '\t' {
			i++
		}
		tok := list[start:i]
		for i < len(list) && (list[i] == ' ' || list[i] == '\t') {
			i++
		}
		if i == len(list) || list[i] == ',' {
			if len(tok) == len(name) && equalFoldASCII(tok, name) {
				return true
			}
			continue
		}
		if list[i] != '=' {
			// Not a directive: skip to the next element.
			for i < len(list) && list[i] != ',' {
				i++
			}
			continue
		}
		i++
		for i < len(list) && (list[i] == ' ' || list[i] == '\t') {
			i++
		}
		if i < len(list) && list[i] == '"' {
			for i++; i < len(list) && list[i] != '"'; i++ {
				if list[i] == '\\' {
					i++
				}
			}
			i++
		}
		for i < len(list) && list[i] != ',' {
			i++
		}
	}
	return false
}

// equalFoldASCII compares b with s, s in lower case, ignoring ASCII case.
func equalFoldASCII(b []byte, s string) bool {
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
