package route

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The rules of a route, stated once. Each function below judges one part
// of a Spec as a person writes it and says what is wrong in the words of
// relay's configuration file, whose keys (match.host, replace_prefix,
// redirect.port, ...) name the parts: internal/config calls them for each
// value it reads, New calls them for each part of a Spec it is given, and
// Spec.Check judges the parts together. A message does not name the key
// it judges; the caller, which knows it, puts it in front.

// Schemes are the schemes a route matches and a redirect writes, for a
// caller that suggests one for a mistyped value.
var Schemes = []string{"http", "https"}

// HostPattern judges one host a route matches, as written, and returns it
// in the form matching compares: lower case, without one trailing dot
// (which names the same host), an IPv6 address in brackets in its
// canonical form, a wildcard as "*." and a domain. A port is refused: the
// request's port is ignored when hosts are compared.
func HostPattern(s string) (string, error) {
	h := strings.ToLower(s)
	if strings.HasPrefix(h, "[") {
		a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
		if err != nil || !strings.HasSuffix(h, "]") || !a.Is6() || a.Zone() != "" {
			return "", fmt.Errorf("%s is not an IPv6 address in brackets such as [2001:db8::1]; a port is not given here (routes match whatever the port)", quote(s))
		}
		return "[" + a.String() + "]", nil
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Is6() {
		return "", fmt.Errorf("%s: an IPv6 address is written in brackets, as the Host header has it: [%s]", quote(s), h)
	}
	rest, wild := strings.CutPrefix(h, "*.")
	if wild && strings.HasPrefix(rest, "[") {
		return "", fmt.Errorf("%s: a wildcard stands for the first labels of a domain, not for part of an IPv6 address", quote(s))
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		return "", fmt.Errorf("%s holds a port; a host rule matches the host whatever the port, so write %s", quote(s), quote(h[:i]))
	}
	if rest != "" {
		rest = strings.TrimSuffix(rest, ".")
	}
	if err := checkHostName(rest, s); err != nil {
		return "", err
	}
	if wild {
		return "*." + rest, nil
	}
	return rest, nil
}

// RedirectHost judges the host a redirect sends to and returns it in lower
// case: a host name or an IPv6 address in brackets, no wildcard and no
// port (a redirect's port is a part of its own).
func RedirectHost(s string) (string, error) {
	h := strings.ToLower(s)
	if strings.HasPrefix(h, "*") {
		return "", fmt.Errorf("%s: a redirect goes to one host, not a pattern", quote(s))
	}
	if strings.HasPrefix(h, "[") || strings.Contains(h, ":") {
		if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil && a.Is6() && a.Zone() == "" {
			return "[" + a.String() + "]", nil
		}
		return "", fmt.Errorf("%s holds a port or is not an address; give the port as redirect.port", quote(s))
	}
	if err := checkHostName(h, s); err != nil {
		return "", err
	}
	return h, nil
}

// checkHostName says what is wrong with a host name (after a leading
// "*."), or nil. orig is the host as written, for the message.
func checkHostName(h, orig string) error {
	switch {
	case h == "":
		return fmt.Errorf("%s has no host name", quote(orig))
	case len(h) > 253:
		return fmt.Errorf("%s is longer than a host name may be (253)", quote(orig))
	case strings.HasSuffix(h, "."):
		return fmt.Errorf("%s ends with a dot; write it without the dot", quote(orig))
	}
	for _, label := range strings.Split(h, ".") {
		switch {
		case label == "":
			return fmt.Errorf("%s has an empty label (two dots in a row, or a leading dot)", quote(orig))
		case strings.Contains(label, "*"):
			return fmt.Errorf("%s: \"*\" may only stand as the whole first label, as in *.example.com", quote(orig))
		case len(label) > 63:
			return fmt.Errorf("%s has a label longer than 63 characters", quote(orig))
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("%s holds %q; host names hold letters, digits, '-' and '_' (write an internationalised name in its xn-- form)", quote(orig), string(rune(c)))
			}
		}
	}
	return nil
}

// Path judges a path a route matches (match.path, match.path_prefix) or
// writes (replace_prefix, redirect.path), as written, and returns it in
// normal form: escapes of unreserved characters decoded, the others in
// upper case. Request paths are normalised before they are matched (the
// package comment gives the rule), so a path whose normal form would
// differ in more than how its escapes are spelled could never match and
// is refused rather than left silently dead.
func Path(s string) (string, error) {
	if !strings.HasPrefix(s, "/") {
		return "", fmt.Errorf("must start with \"/\", got %s", quote(s))
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		if s[i] == '?' {
			return "", fmt.Errorf("%s holds a query; paths are matched without it (match a query parameter with match.query)", quote(s))
		}
		return "", fmt.Errorf("%s holds a fragment (#), which clients never send", quote(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return "", fmt.Errorf("%s holds a %% that does not start an escape (%%XX, two hex digits); write %%25 for %%", quote(s))
			}
			i += 2
		case c == '\\':
			return "", fmt.Errorf("%s holds a backslash; request paths never hold one when they are matched (see escaped_slashes)", quote(s))
		case c != '/' && !pathByte[c]:
			return "", fmt.Errorf("%s holds %s, which a request path carries percent-encoded: write %s", quote(s), describeByte(c), quote(encodePath(s)))
		}
	}
	n := normalEscapes(s)
	if strings.Contains(n, "//") {
		return "", fmt.Errorf("%s holds repeated slashes, which relay merges in request paths before matching; write one", quote(s))
	}
	for _, seg := range strings.Split(n, "/") {
		if seg == "." || seg == ".." {
			return "", fmt.Errorf("%s holds a dot segment (%s), which relay removes from request paths before matching; write the path without it", quote(s), quote(seg))
		}
	}
	return n, nil
}

// normalEscapes writes the escapes of s as normalisation does: those of
// unreserved characters decoded, the others in upper case.
func normalEscapes(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			if c := unhex(s[i+1])<<4 | unhex(s[i+2]); unreserved[c] {
				b = append(b, c)
			} else {
				b = appendEscape(b, c)
			}
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

// escapedSlash reports whether a path in normal form holds %2F or %5C.
func escapedSlash(p string) bool {
	return strings.Contains(p, "%2F") || strings.Contains(p, "%5C")
}

// encodePath percent-encodes every byte of s that a path may not carry
// as it is.
func encodePath(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '/' || c == '%' || pathByte[c] {
			b = append(b, c)
		} else {
			b = appendEscape(b, c)
		}
	}
	return string(b)
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

// Method judges a method a route matches.
func Method(m string) error {
	if !isToken(m) {
		return fmt.Errorf("%s is not a method name (letters, digits and !#$%%&'*+-.^_`|~)", quote(m))
	}
	return nil
}

// HeaderCondition judges the name of a header field a route matches.
func HeaderCondition(name string) error {
	if !isToken(name) {
		return notHeaderName(name)
	}
	if strings.EqualFold(name, "Host") {
		return errors.New("the host is matched with match.host, which ignores the port and case and knows wildcards")
	}
	return nil
}

// QueryCondition judges the name of a query parameter a route matches.
func QueryCondition(name string) error {
	if name == "" {
		return errors.New("a query parameter's name must not be empty")
	}
	return nil
}

// FieldValue judges a header field's or query parameter's value a route
// matches or writes: a line break would end the field early and let the
// value write fields of its own.
func FieldValue(v string) error {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("%s holds a control character (a line break?); a field value is one line", quote(v))
		}
	}
	if strings.TrimSpace(v) != v {
		return fmt.Errorf("%s starts or ends with white space, which is not part of a field value; quote the value without it", quote(v))
	}
	return nil
}

// HeaderChange judges the name of a header field a route sets, adds or
// removes.
func HeaderChange(name string) error {
	if !isToken(name) {
		return notHeaderName(name)
	}
	switch strings.ToLower(name) {
	case "connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade":
		return fmt.Errorf("%s is a hop-by-hop field: it describes one connection, and relay writes its own on each side (RFC 9110 7.6.1)", name)
	case "content-length", "transfer-encoding":
		return fmt.Errorf("%s frames the message: relay writes it from the body it sends, and a wrong one would corrupt the connection", name)
	case "host":
		return errors.New("Host names the site the client asked for, which relay forwards as it came; route by it with match.host")
	}
	return nil
}

func notHeaderName(name string) error {
	return fmt.Errorf("%s is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", quote(name))
}

// Scheme judges the scheme a route matches.
func Scheme(s string) error {
	if s != "http" && s != "https" {
		return fmt.Errorf(`must be "http" or "https" (the scheme the client reached relay with), got %s`, quote(s))
	}
	return nil
}

// RedirectScheme judges the scheme a redirect sends to.
func RedirectScheme(s string) error {
	if s != "http" && s != "https" {
		return fmt.Errorf(`must be "http" or "https", got %s`, quote(s))
	}
	return nil
}

// RedirectStatus judges a redirect's status.
func RedirectStatus(n int) error {
	switch n {
	case 301, 302, 303, 307, 308:
		return nil
	}
	return fmt.Errorf("%d is not a redirect status; use 301 or 308 (permanent), 302, 303 or 307 (temporary; 307 and 308 keep the method and body)", n)
}

// RedirectPort judges the port a redirect writes. (A Spec's Port of 0
// writes none; a port given is one of these.)
func RedirectPort(n int) error {
	if n < 1 || n > 65535 {
		return fmt.Errorf("must be between 1 and 65535, got %d", n)
	}
	return nil
}

// ParseEscapedSlashes returns the mode the configuration's name stands
// for (EscapedSlashes.String's), and whether it names one.
func ParseEscapedSlashes(name string) (EscapedSlashes, bool) {
	for _, m := range EscapedSlashesModes {
		if m.String() == name {
			return m, true
		}
	}
	return Reject, false
}

// EscapedSlashesModes are the modes, in the order the configuration
// lists them.
var EscapedSlashesModes = []EscapedSlashes{Reject, Decode, Keep}

// quote quotes s for a message, cut short so that a stray paste of
// something huge does not flood the terminal.
func quote(s string) string {
	if len(s) > 60 {
		return strconv.Quote(s[:60]) + "..."
	}
	return strconv.Quote(s)
}
