package route

import (
	"bytes"

	"relay/internal/h1"
)

// Match is what Table.Match found for one request. It holds its own
// buffers and is meant to be reused, one per exchange, so that matching
// allocates nothing once they have grown.
type Match struct {
	// Route is the index of the matching route, or -1.
	Route int
	// Secure says the request came over TLS, for routes that match on
	// the scheme; the caller sets it before Match.
	Secure bool

	path   []byte // the normalised request path, or "*"
	target []byte // the path the backend gets, then "?" and the query
	query  int    // index of "?" in target, or len(target)
	host   []byte // the request's host name, lower-case, no port
	hostOK bool
	loc    []byte // a redirect's Location
}

// Target returns the request target the backend must get: the normalised
// path after any rewrite, then the query as the client sent it. It is
// valid until the next use of m.
func (m *Match) Target() []byte { return m.target }

// Path returns the normalised request path, before any rewrite: the path
// the routes were matched against ("*" for an OPTIONS "*" request).
func (m *Match) Path() []byte { return m.path }

// Query returns the query with its leading "?", or nil when the target has
// none.
func (m *Match) Query() []byte {
	if m.query == len(m.target) {
		return nil
	}
	return m.target[m.query:]
}

// Match finds the first route req matches and fills m. ok reports a match
// (m.Route is then its index); err reports a target that must be refused
// with 400 (ErrEscapedSlash, ErrEscape, ErrTarget), and then m.Route is -1
// and m.Target empty. Otherwise m.Target is filled whether a route matched
// or not (a table without routes still normalises).
func (t *Table) Match(req *h1.Request, m *Match) (ok bool, err error) {
	m.Route = -1
	m.path, m.target, m.query = m.path[:0], m.target[:0], 0
	tgt := req.Target
	star := len(tgt) == 1 && tgt[0] == '*'
	var query []byte
	hasQuery := false
	if star {
		m.path = append(m.path, '*')
	} else {
		p := tgt
		if i := bytes.IndexByte(tgt, '?'); i >= 0 {
			p, query, hasQuery = tgt[:i], tgt[i+1:], true
		}
		if m.path, err = appendNormal(m.path, p, t.mode); err != nil {
			return false, err
		}
	}
	m.host, m.hostOK = appendHost(m.host[:0], req.Host)

	var exact, wild []int32
	if m.hostOK {
		var hit bool
		if exact, hit = t.exact[string(m.host)]; !hit && len(t.wild) > 0 && m.host[0] != '[' {
			wild = t.wildFor(m.host)
		}
	}
	hostless := t.hostless
	for {
		// Merge the three ascending lists: the smallest index next.
		i := int32(-1)
		if len(exact) > 0 {
			i = exact[0]
		}
		if len(wild) > 0 && (i < 0 || wild[0] < i) {
			i = wild[0]
		}
		if len(hostless) > 0 && (i < 0 || hostless[0] < i) {
			i = hostless[0]
		}
		if i < 0 {
			break
		}
		if len(exact) > 0 && exact[0] == i {
			exact = exact[1:]
		}
		if len(wild) > 0 && wild[0] == i {
			wild = wild[1:]
		}
		if len(hostless) > 0 && hostless[0] == i {
			hostless = hostless[1:]
		}
		if r := &t.routes[i]; r.schemeOK(m.Secure) && r.matchRest(req, m.path, star, query) {
			m.Route = int(i)
			break
		}
	}

	if m.Route >= 0 && t.routes[m.Route].rewrite && !star {
		r := &t.routes[m.Route]
		m.target = rewrite(m.target, m.path, r.prefix, r.replace)
	} else {
		m.target = append(m.target, m.path...)
	}
	m.query = len(m.target)
	if hasQuery {
		m.target = append(m.target, '?')
		m.target = append(m.target, query...)
	}
	return m.Route >= 0, nil
}

// schemeOK reports whether a request over TLS (secure) or not is one r's
// scheme condition takes.
func (r *compiled) schemeOK(secure bool) bool {
	return r.spec.Scheme == "" || (r.spec.Scheme == "https") == secure
}

// wildFor returns the candidates of the longest suffix of host (after one
// of its dots) that a wildcard names.
func (t *Table) wildFor(host []byte) []int32 {
	for i := 0; i < len(host); i++ {
		if host[i] == '.' {
			if l, ok := t.wild[string(host[i+1:])]; ok {
				return l
			}
		}
	}
	return nil
}

// rewrite appends path with prefix (which it lies under) replaced by
// replace. Both are in normal form, so only their joint needs care: one
// "/" between them, and a prefix ending in "/" keeps that "/" as the
// separator. The result is in normal form too.
func rewrite(out, path []byte, prefix, replace string) []byte {
	out = append(out, replace...)
	rest := path[len(prefix):]
	endsSlash := out[len(out)-1] == '/'
	switch {
	case prefix[len(prefix)-1] == '/':
		if !endsSlash {
			out = append(out, '/')
		}
	case len(rest) > 0 && endsSlash:
		rest = rest[1:]
	}
	return append(out, rest...)
}

// matchRest checks every condition but the host, which the candidate
// lists have settled.
func (r *compiled) matchRest(req *h1.Request, path []byte, star bool, query []byte) bool {
	if r.path != "" || r.prefix != "" {
		if star {
			return false
		}
		if r.path != "" && string(path) != r.path {
			return false
		}
		if r.prefix != "" && !hasSegmentPrefix(path, r.prefix) {
			return false
		}
	}
	if len(r.methods) > 0 && !r.methodOK(req.Method) {
		return false
	}
	for i := range r.headers {
		if !headerOK(req.Fields, &r.headers[i]) {
			return false
		}
	}
	for i := range r.query {
		if !queryOK(query, &r.query[i]) {
			return false
		}
	}
	return true
}

func (r *compiled) methodOK(method []byte) bool {
	for _, m := range r.methods {
		if string(method) == m {
			return true
		}
	}
	return false
}

// headerOK reports whether a field named kv.Name (lower-case) has the
// value kv.Value, or any value when that is "".
func headerOK(fields []h1.Field, kv *KV) bool {
	for i := range fields {
		f := &fields[i]
		if f.Is(kv.Name) && (kv.Value == "" || string(f.Value) == kv.Value) {
			return true
		}
	}
	return false
}

// queryOK reports whether the query (without "?") has a parameter named
// kv.Name whose value is kv.Value, or any value when that is "". Names and
// values are compared decoded: percent-escapes and "+" for a space, as
// forms encode them.
func queryOK(query []byte, kv *KV) bool {
	for len(query) > 0 {
		var param []byte
		if i := bytes.IndexByte(query, '&'); i >= 0 {
			param, query = query[:i], query[i+1:]
		} else {
			param, query = query, nil
		}
		name, value := param, []byte(nil)
		if i := bytes.IndexByte(param, '='); i >= 0 {
			name, value = param[:i], param[i+1:]
		}
		if decodedEqual(name, kv.Name) && (kv.Value == "" || decodedEqual(value, kv.Value)) {
			return true
		}
	}
	return false
}

// decodedEqual reports whether the query text enc, decoded, equals want.
// A "%" that does not start an escape stands for itself.
func decodedEqual(enc []byte, want string) bool {
	j := 0
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		switch {
		case c == '+':
			c = ' '
		case c == '%' && i+2 < len(enc) && isHex(enc[i+1]) && isHex(enc[i+2]):
			c = unhex(enc[i+1])<<4 | unhex(enc[i+2])
			i += 2
		}
		if j >= len(want) || want[j] != c {
			return false
		}
		j++
	}
	return j == len(want)
}
