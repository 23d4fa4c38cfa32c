package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// checkHostPattern checks one match.host entry and returns it in lower
// case: an exact host name or IP address, or "*." and a domain. A port
// is refused: the request's port is ignored when hosts are compared.
func checkHostPattern(s string) (string, string) {
	h := strings.ToLower(s)
	if strings.HasPrefix(h, "[") {
		a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
		if err != nil || !strings.HasSuffix(h, "]") || !a.Is6() || a.Zone() != "" {
			return "", fmt.Sprintf("%s is not an IPv6 address in brackets such as [2001:db8::1]; a port is not given here (routes match whatever the port)", quote(s))
		}
		return "[" + a.String() + "]", ""
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Is6() {
		return "", fmt.Sprintf("%s: an IPv6 address is written in brackets, as the Host header has it: [%s]", quote(s), h)
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		return "", fmt.Sprintf("%s holds a port; a host rule matches the host whatever the port, so write %s", quote(s), quote(h[:i]))
	}
	rest, wild := strings.CutPrefix(h, "*.")
	if msg := checkHostName(rest, s); msg != "" {
		return "", msg
	}
	if wild && !strings.Contains(rest, ".") && rest != "localhost" {
		// *.com would take a whole top-level domain; nobody means that.
		return "", fmt.Sprintf("%s: a wildcard needs a domain of at least two labels after \"*.\", such as *.example.com", quote(s))
	}
	return h, ""
}

// checkHostName says what is wrong with a host name (after a leading
// "*."), or "". orig is the entry as written, for the message.
func checkHostName(h, orig string) string {
	switch {
	case h == "":
		return fmt.Sprintf("%s has no host name", quote(orig))
	case len(h) > 253:
		return fmt.Sprintf("%s is longer than a host name may be (253)", quote(orig))
	case strings.HasSuffix(h, "."):
		return fmt.Sprintf("%s ends with a dot; write it without the dot", quote(orig))
	}
	for _, label := range strings.Split(h, ".") {
		switch {
		case label == "":
			return fmt.Sprintf("%s has an empty label (two dots in a row, or a leading dot)", quote(orig))
		case label == "*" || strings.Contains(label, "*"):
			return fmt.Sprintf("%s: \"*\" may only stand as the whole first label, as in *.example.com", quote(orig))
		case len(label) > 63:
			return fmt.Sprintf("%s has a label longer than 63 characters", quote(orig))
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Sprintf("%s holds %q; host names hold letters, digits, '-' and '_' (write an internationalised name in its xn-- form)", quote(orig), string(rune(c)))
			}
		}
	}
	return ""
}

// checkRedirectHost checks a redirect's host: a host name or IP address,
// no wildcard and no port (redirect.port gives one).
func checkRedirectHost(s string) (string, string) {
	h := strings.ToLower(s)
	if strings.HasPrefix(h, "*") {
		return "", fmt.Sprintf("%s: a redirect goes to one host, not a pattern", quote(s))
	}
	if strings.HasPrefix(h, "[") || strings.Contains(h, ":") {
		if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && a.Is6() && a.Zone() == "" {
			return "[" + a.String() + "]", ""
		}
		return "", fmt.Sprintf("%s holds a port or is not an address; give the port as redirect.port", quote(s))
	}
	if msg := checkHostName(h, s); msg != "" {
		return "", msg
	}
	return h, ""
}

// checkRoutePath says what is wrong with a path a route matches or
// writes, or "". Request paths are normalised before they are matched
// (unreserved characters decoded, escapes upper-cased, dot segments
// removed, repeated slashes merged), so a path that normalisation would
// change could never match and is refused rather than silently dead.
func checkRoutePath(s string) string {
	if !strings.HasPrefix(s, "/") {
		return fmt.Sprintf("must start with \"/\", got %s", quote(s))
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		if s[i] == '?' {
			return fmt.Sprintf("%s holds a query; paths are matched without it (match a query parameter with match.query)", quote(s))
		}
		return fmt.Sprintf("%s holds a fragment (#), which clients never send", quote(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return fmt.Sprintf("%s holds a %% that does not start an escape (%%XX, two hex digits); write %%25 for %%", quote(s))
			}
			i += 2
		case c == '\\':
			return fmt.Sprintf("%s holds a backslash; request paths never hold one when they are matched (see escaped_slashes)", quote(s))
		case !pathByte(c):
			return fmt.Sprintf("%s holds %s, which a request path carries percent-encoded: write %s", quote(s), describeByte(c), quote(encodePath(s)))
		}
	}
	n := normalizeRoutePath(s)
	if strings.Contains(n, "//") {
		return fmt.Sprintf("%s holds repeated slashes, which relay merges in request paths before matching; write one", quote(s))
	}
	for _, seg := range strings.Split(n, "/") {
		if seg == "." || seg == ".." || strings.EqualFold(seg, "%2E") || strings.EqualFold(seg, "%2E%2E") {
			return fmt.Sprintf("%s holds a dot segment (%s), which relay removes from request paths before matching; write the path without it", quote(s), quote(seg))
		}
	}
	return ""
}

// normalizeRoutePath writes a path as relay normalises request paths:
// escapes of unreserved characters decoded, the others upper-cased.
// Dot segments and repeated slashes are refused by checkRoutePath.
func normalizeRoutePath(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			c := unhex(s[i+1])<<4 | unhex(s[i+2])
			if unreserved(c) {
				b.WriteByte(c)
			} else {
				b.WriteByte('%')
				b.WriteString(strings.ToUpper(s[i+1 : i+3]))
			}
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// escapedSlash reports whether a normalised path holds %2F or %5C.
func escapedSlash(p string) bool {
	return strings.Contains(p, "%2F") || strings.Contains(p, "%5C")
}

// encodePath percent-encodes every byte of s that a path may not carry
// as it is.
func encodePath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; pathByte(c) || c == '%' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func describeByte(c byte) string {
	switch {
	case c == ' ':
		return "a space"
	case c < ' ' || c == 0x7f:
		return "a control character"
	case c >= 0x80:
		return "a non-ASCII character"
	}
	return quote(string(rune(c)))
}

// pathByte reports whether c may stand in a path as it is (RFC 3986
// pchar and "/").
func pathByte(c byte) bool {
	return unreserved(c) || strings.IndexByte("!$&'()*+,;=:@/", c) >= 0
}

func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// isToken reports whether s is an HTTP token (RFC 9110 5.6.2), what
// method and header names are.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// checkFieldValue says what is wrong with a header or query value, or "":
// a line break would end the field early and let the value write fields
// of its own.
func checkFieldValue(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Sprintf("%s holds a control character (a line break?); a field value is one line", quote(v))
		}
	}
	if strings.TrimSpace(v) != v {
		return fmt.Sprintf("%s starts or ends with white space, which is not part of a field value; quote the value without it", quote(v))
	}
	return ""
}

// settableHeader says why a route may not set, add or remove the header
// field name, or "".
func settableHeader(name string) string {
	if !isToken(name) {
		return fmt.Sprintf("%s is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", quote(name))
	}
	switch strings.ToLower(name) {
	case "connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade":
		return fmt.Sprintf("%s is a hop-by-hop field: it describes one connection, and relay writes its own on each side (RFC 9110 7.6.1)", name)
	case "content-length", "transfer-encoding":
		return fmt.Sprintf("%s frames the message: relay writes it from the body it sends, and a wrong one would corrupt the connection", name)
	case "host":
		return "Host names the site the client asked for, which relay forwards as it came; route by it with match.host"
	}
	return ""
}
