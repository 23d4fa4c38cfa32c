package route

import "bytes"

// appendHost appends the host name of the authority h, lower-cased, without
// its port and one trailing dot, and reports whether h is a well-formed
// authority: a host name of labels (reg-name characters, none empty) or an
// IPv6 literal in brackets, then an optional port of digits. A request
// whose host is not has no host to match, so it matches no host rule.
func appendHost(out, h []byte) ([]byte, bool) {
	base := len(out)
	var name, rest []byte
	if len(h) > 0 && h[0] == '[' {
		end := bytes.IndexByte(h, ']')
		if end < 3 {
			return out, false
		}
		for _, c := range h[1:end] {
			if !isHex(c) && c != ':' && c != '.' {
				return out, false
			}
		}
		name, rest = h[:end+1], h[end+1:]
	} else {
		// One pass checks the name and copies it lower-cased.
		i, prev := 0, byte('.')
		for ; i < len(h) && h[i] != ':'; i++ {
			c := hostLower[h[i]]
			if c == 0 || c == '.' && prev == '.' {
				return out[:base], false
			}
			out = append(out, c)
			prev = c
		}
		rest = h[i:]
		if len(out) == base {
			return out, false
		}
		if prev == '.' { // one trailing dot names the same host
			out = out[:len(out)-1]
		}
	}
	if len(rest) > 0 {
		if rest[0] != ':' {
			return out[:base], false
		}
		for _, c := range rest[1:] {
			if c < '0' || c > '9' {
				return out[:base], false
			}
		}
	}
	if name != nil { // an IPv6 literal
		for _, c := range name {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			out = append(out, c)
		}
	}
	return out, true
}

// validName reports whether n is a non-empty host name whose labels are
// non-empty runs of reg-name characters (RFC 3986 section 3.2.2, without
// percent-encoding, which clients do not send in a Host).
func validName(n []byte) bool {
	if len(n) == 0 {
		return false
	}
	prev := byte('.')
	for _, c := range n {
		if c == '.' && prev == '.' || !regName[c] {
			return false
		}
		prev = c
	}
	return prev != '.'
}

// regName marks unreserved and sub-delims characters.
var regName = byteSet("-._~!$&'()*+,;=")

// hostLower maps the bytes of a reg-name to their lower case, every other
// byte to 0.
var hostLower = func() (t [256]byte) {
	for c := range t {
		if regName[c] {
			t[c] = byte(c)
			if 'A' <= c && c <= 'Z' {
				t[c] += 'a' - 'A'
			}
		}
	}
	return t
}()

// hostMatches reports whether the lower-case host name h matches the
// compiled pattern p: equal, or, for "*.suffix" (kept as ".suffix"), a
// name of at least one more label ending in it.
func hostMatches(h []byte, p string) bool {
	if len(p) > 0 && p[0] == '.' {
		return len(h) > len(p) && string(h[len(h)-len(p):]) == p
	}
	return string(h) == p
}
