package route

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Table is a compiled, immutable list of routes.
type Table struct {
	mode   EscapedSlashes
	routes []compiled
	// Candidates by host, each list ascending: exact[h] holds the routes
	// naming host h or a wildcard that matches it; wild[s], for a host no
	// route names, the routes with a wildcard that matches every name
	// ending in "."+s (so the longest s found covers the shorter ones);
	// hostless the routes with no host condition. Match merges the one
	// host list that applies with hostless, so a request looks only at
	// routes its host allows, after one map lookup when its host is named.
	exact    map[string][]int32
	wild     map[string][]int32
	hostless []int32
}

// compiled is a Spec checked and put in the form matching wants.
type compiled struct {
	spec    Spec
	hosts   []string // lower-case names; "*.suffix" kept as ".suffix"
	path    string
	prefix  string
	methods []string
	headers []KV // names lower-case
	query   []KV
	rewrite bool
	replace string // what replaces prefix when rewrite ("/" for a strip)
}

// New checks and compiles specs in order. The error names the route and
// what is wrong with it.
func New(specs []Spec, mode EscapedSlashes) (*Table, error) {
	if mode > Keep {
		return nil, fmt.Errorf("route: escaped slashes mode %d is not reject, decode or keep", mode)
	}
	t := &Table{
		mode:   mode,
		routes: make([]compiled, len(specs)),
		exact:  map[string][]int32{},
		wild:   map[string][]int32{},
	}
	names := map[string]int{}
	for i := range specs {
		s := specs[i]
		if s.Name == "" {
			s.Name = "routes[" + strconv.Itoa(i) + "]"
		}
		if j, dup := names[s.Name]; dup {
			return nil, fmt.Errorf("route %q: the name is used by routes[%d] too", s.Name, j)
		}
		names[s.Name] = i
		c, err := compile(s, mode)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", s.Name, err)
		}
		t.routes[i] = c
	}
	t.index()
	return t, nil
}

// index builds the candidate lists. Each list is built from the
// wildcards that match its name, found by the name's suffixes, so the
// work is the size of the lists, not the number of routes times the
// number of hosts named.
func (t *Table) index() {
	byWild := map[string][]int32{} // ".suffix": the routes with "*.suffix", ascending
	for i := range t.routes {
		r := &t.routes[i]
		if len(r.hosts) == 0 {
			t.hostless = append(t.hostless, int32(i))
			continue
		}
		for _, h := range r.hosts {
			if h[0] == '.' {
				byWild[h] = appendOnce(byWild[h], int32(i))
			} else {
				t.exact[h] = appendOnce(t.exact[h], int32(i))
			}
		}
	}
	for p := range byWild {
		t.wild[p[1:]] = withWildcards(p, nil, byWild)
	}
	for h, l := range t.exact {
		t.exact[h] = withWildcards(h, l, byWild)
	}
}

// appendOnce appends i to the ascending list l unless it ends with i.
func appendOnce(l []int32, i int32) []int32 {
	if len(l) > 0 && l[len(l)-1] == i {
		return l
	}
	return append(l, i)
}

// withWildcards returns list (ascending) merged, in order, with the
// routes of every wildcard in byWild that matches the name, or, when name
// starts with a dot, every name that ends in it: those whose ".suffix" is
// the name from one of its dots on.
func withWildcards(name string, list []int32, byWild map[string][]int32) []int32 {
	out, merged := list, false
	for i := 0; i < len(name); i++ {
		if name[i] != '.' {
			continue
		}
		if w, ok := byWild[name[i:]]; ok {
			out, merged = append(out, w...), true
		}
	}
	if merged {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out
}

// Len returns the number of routes.
func (t *Table) Len() int { return len(t.routes) }

// Mode returns the table's escaped slashes mode.
func (t *Table) Mode() EscapedSlashes { return t.mode }

// Spec returns route i as given to New, with its name filled in. The
// caller must not change it.
func (t *Table) Spec(i int) *Spec { return &t.routes[i].spec }

func compile(s Spec, mode EscapedSlashes) (compiled, error) {
	c := compiled{spec: s}
	if s.Scheme != "" && s.Scheme != "http" && s.Scheme != "https" {
		return c, fmt.Errorf("scheme %q is not http or https", s.Scheme)
	}
	for _, h := range s.Hosts {
		p, err := hostPattern(h)
		if err != nil {
			return c, err
		}
		if !contains(c.hosts, p) {
			c.hosts = append(c.hosts, p)
		}
	}
	var err error
	if c.path, err = normalPath("path", s.Path, mode); err != nil {
		return c, err
	}
	if c.prefix, err = normalPath("path_prefix", s.PathPrefix, mode); err != nil {
		return c, err
	}
	for _, m := range s.Methods {
		if !isToken(m) {
			return c, fmt.Errorf("method %q is not a token", m)
		}
	}
	c.methods = s.Methods
	for _, h := range s.Headers {
		if !isToken(h.Name) {
			return c, fmt.Errorf("header name %q is not a token", h.Name)
		}
		if !validValue(h.Value) {
			return c, fmt.Errorf("header %s: value %q holds a control character", h.Name, h.Value)
		}
		c.headers = append(c.headers, KV{strings.ToLower(h.Name), h.Value})
	}
	for _, q := range s.Query {
		if q.Name == "" {
			return c, fmt.Errorf("query parameter without a name")
		}
	}
	c.query = s.Query
	switch {
	case s.StripPrefix && s.Replace:
		return c, fmt.Errorf("strip_prefix and replace_prefix exclude each other")
	case (s.StripPrefix || s.Replace) && c.prefix == "":
		return c, fmt.Errorf("strip_prefix and replace_prefix need match.path_prefix")
	case s.StripPrefix:
		c.rewrite, c.replace = true, "/"
	case s.Replace:
		c.rewrite, c.replace = true, s.ReplacePrefix
		if s.ReplacePrefix == "" {
			c.replace = "/"
		} else if _, err := normalPath("replace_prefix", s.ReplacePrefix, mode); err != nil {
			return c, err
		}
	}
	for _, ops := range []*HeaderOps{&s.RequestHeaders, &s.ResponseHeaders} {
		if err := checkOps(ops); err != nil {
			return c, err
		}
	}
	if s.Redirect != nil {
		if err := checkRedirect(s.Redirect, mode); err != nil {
			return c, err
		}
		r := *s.Redirect
		c.spec.Redirect = &r
	}
	return c, nil
}

// hostPattern checks a host rule and returns it compiled: lower-case
// without a trailing dot, a wildcard as ".suffix".
func hostPattern(h string) (string, error) {
	p := strings.TrimSuffix(strings.ToLower(h), ".")
	wild := strings.HasPrefix(p, "*.")
	name := p
	if wild {
		name = p[2:]
	}
	if strings.HasPrefix(name, "[") {
		if n, ok := appendHost(nil, []byte(name)); ok && string(n) == name && !wild {
			return p, nil
		}
		return "", fmt.Errorf("host %q is not a host name or an IPv6 literal without a port", h)
	}
	if strings.IndexByte(name, '*') >= 0 {
		return "", fmt.Errorf("host %q: \"*\" is allowed only as a leading \"*.\"", h)
	}
	if !validName([]byte(name)) {
		return "", fmt.Errorf("host %q is not a host name (labels of letters, digits, \"-\", no port)", h)
	}
	if wild {
		return p[1:], nil
	}
	return p, nil
}

// normalPath checks that p is "" or a path in normal form.
func normalPath(key, p string, mode EscapedSlashes) (string, error) {
	if p == "" {
		return "", nil
	}
	if p[0] != '/' || strings.IndexByte(p, '?') >= 0 {
		return "", fmt.Errorf("%s %q must start with \"/\" and hold no query", key, p)
	}
	n, err := appendNormal(nil, []byte(p), mode)
	if err != nil {
		return "", fmt.Errorf("%s %q: %v (escaped_slashes: %s)", key, p, strings.TrimPrefix(err.Error(), "route: "), mode)
	}
	if string(n) != p {
		return "", fmt.Errorf("%s %q is not in normal form: write %q", key, p, n)
	}
	return p, nil
}

func checkOps(ops *HeaderOps) error {
	for _, kvs := range [][]KV{ops.Set, ops.Add} {
		for _, kv := range kvs {
			if !isToken(kv.Name) {
				return fmt.Errorf("header name %q is not a token", kv.Name)
			}
			if !validValue(kv.Value) {
				return fmt.Errorf("header %s: value %q holds a control character", kv.Name, kv.Value)
			}
		}
	}
	for _, n := range ops.Remove {
		if !isToken(n) {
			return fmt.Errorf("header name %q is not a token", n)
		}
	}
	return nil
}

func checkRedirect(r *Redirect, mode EscapedSlashes) error {
	switch r.Status {
	case 301, 302, 303, 307, 308:
	default:
		return fmt.Errorf("redirect status %d is not 301, 302, 303, 307 or 308", r.Status)
	}
	switch r.Scheme {
	case "", "http", "https":
	default:
		return fmt.Errorf("redirect scheme %q is not http or https", r.Scheme)
	}
	if r.Host != "" {
		p, err := hostPattern(r.Host)
		if err != nil {
			return fmt.Errorf("redirect: %w", err)
		}
		if p[0] == '.' {
			return fmt.Errorf("redirect host %q is a wildcard", r.Host)
		}
	}
	if r.Port < 0 || r.Port > 65535 {
		return fmt.Errorf("redirect port %d is not 0 to 65535", r.Port)
	}
	if _, err := normalPath("redirect path", r.Path, mode); err != nil {
		return err
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token (a method or field name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenByte[s[i]] {
			return false
		}
	}
	return true
}

var tokenByte = byteSet("!#$%&'*+-.^_`|~")

// validValue reports whether a field value holds no control character
// other than a tab, so it cannot split a head.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
