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

// New checks and compiles specs in order: each by the rules of rules.go
// and Spec.Check, with its paths in normal form (Path's), as the
// configuration leaves them. The error names the route and what is wrong
// with it.
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
	taken := Taken(specs)
	for i := range specs {
		s := specs[i]
		s.Name = Name(s.Name, i)
		if j := taken[i]; j >= 0 {
			return nil, fmt.Errorf("route %q: the name is used by routes[%d] too", s.Name, j)
		}
		c, err := compile(s, mode)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", s.Name, err)
		}
		t.routes[i] = c
	}
	t.index()
	return t, nil
}

// Name is the name of the route at index i whose Spec names it name:
// name, or "routes[i]" when that is "".
func Name(name string, i int) string {
	if name == "" {
		return "routes[" + strconv.Itoa(i) + "]"
	}
	return name
}

// Taken returns, for each spec, the index of the first spec before it of
// the same name (as Name makes it), or -1: a route's name is its own, as
// it labels the route's metrics and log lines.
func Taken(specs []Spec) []int {
	out := make([]int, len(specs))
	first := make(map[string]int, len(specs))
	for i := range specs {
		name := Name(specs[i].Name, i)
		if j, dup := first[name]; dup {
			out[i] = j
			continue
		}
		first[name], out[i] = i, -1
	}
	return out
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

// compile checks s and puts it in the form matching wants. Every part
// given is judged by its rule, then the parts together (Spec.Check).
func compile(s Spec, mode EscapedSlashes) (compiled, error) {
	c := compiled{spec: s}
	part := func(key string, err error) error { return fmt.Errorf("%s: %w", key, err) }
	if s.Scheme != "" {
		if err := Scheme(s.Scheme); err != nil {
			return c, part("match.scheme", err)
		}
	}
	for i, h := range s.Hosts {
		p, err := HostPattern(h)
		if err != nil {
			return c, part(fmt.Sprintf("match.host[%d]", i), err)
		}
		if rest, wild := strings.CutPrefix(p, "*."); wild {
			p = "." + rest
		}
		if !slices.Contains(c.hosts, p) {
			c.hosts = append(c.hosts, p)
		}
	}
	var err error
	if c.path, err = normalPath("match.path", s.Path); err != nil {
		return c, err
	}
	if c.prefix, err = normalPath("match.path_prefix", s.PathPrefix); err != nil {
		return c, err
	}
	for i, m := range s.Methods {
		if err := Method(m); err != nil {
			return c, part(fmt.Sprintf("match.methods[%d]", i), err)
		}
	}
	c.methods = s.Methods
	for _, h := range s.Headers {
		if err := HeaderCondition(h.Name); err != nil {
			return c, part("match.headers."+h.Name, err)
		}
		if err := FieldValue(h.Value); err != nil {
			return c, part("match.headers."+h.Name, err)
		}
		c.headers = append(c.headers, KV{strings.ToLower(h.Name), h.Value})
	}
	for _, q := range s.Query {
		if err := QueryCondition(q.Name); err != nil {
			return c, part("match.query."+q.Name, err)
		}
		if err := FieldValue(q.Value); err != nil {
			return c, part("match.query."+q.Name, err)
		}
	}
	c.query = s.Query
	if s.Replace && s.ReplacePrefix != "" {
		if _, err := normalPath("replace_prefix", s.ReplacePrefix); err != nil {
			return c, err
		}
	}
	for _, ops := range []struct {
		key string
		ops *HeaderOps
	}{{"request_headers", &s.RequestHeaders}, {"response_headers", &s.ResponseHeaders}} {
		if err := checkOps(ops.key, ops.ops); err != nil {
			return c, err
		}
	}
	if s.Redirect != nil {
		if err := checkRedirect(s.Redirect); err != nil {
			return c, err
		}
		r := *s.Redirect
		c.spec.Redirect = &r
	}
	if ps := s.Check(mode, nil); len(ps) > 0 {
		return c, fmt.Errorf("%s: %s", ps[0].Key, ps[0].Msg)
	}
	switch {
	case s.StripPrefix:
		c.rewrite, c.replace = true, "/"
	case s.Replace:
		c.rewrite, c.replace = true, s.ReplacePrefix
		if s.ReplacePrefix == "" {
			c.replace = "/"
		}
	}
	return c, nil
}

// normalPath checks that p, the part key, is "" or a path (Path's rule)
// in normal form.
func normalPath(key, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	n, err := Path(p)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	if n != p {
		return "", fmt.Errorf("%s: %s is not in normal form: write %s", key, quote(p), quote(n))
	}
	return p, nil
}

// checkOps checks a route's changes to the header fields of a message,
// the part key.
func checkOps(key string, ops *HeaderOps) error {
	for _, set := range []struct {
		action string
		kvs    []KV
	}{{"set", ops.Set}, {"add", ops.Add}} {
		for _, kv := range set.kvs {
			at := key + "." + set.action + "." + kv.Name
			if err := HeaderChange(kv.Name); err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
			if err := FieldValue(kv.Value); err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
		}
	}
	for i, n := range ops.Remove {
		if err := HeaderChange(n); err != nil {
			return fmt.Errorf("%s.remove[%d]: %w", key, i, err)
		}
	}
	return nil
}

// checkRedirect checks each part a redirect gives.
func checkRedirect(r *Redirect) error {
	if err := RedirectStatus(r.Status); err != nil {
		return fmt.Errorf("redirect.status: %w", err)
	}
	if r.Scheme != "" {
		if err := RedirectScheme(r.Scheme); err != nil {
			return fmt.Errorf("redirect.scheme: %w", err)
		}
	}
	if r.Host != "" {
		if _, err := RedirectHost(r.Host); err != nil {
			return fmt.Errorf("redirect.host: %w", err)
		}
	}
	if r.Port != 0 {
		if err := RedirectPort(r.Port); err != nil {
			return fmt.Errorf("redirect.port: %w", err)
		}
	}
	if _, err := normalPath("redirect.path", r.Path); err != nil {
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
