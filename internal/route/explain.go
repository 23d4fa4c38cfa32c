package route

import (
	"fmt"
	"strings"

	"relay/internal/h1"
)

// Explanation says how a table routes one request, for relay -explain and
// tests of a route table.
type Explanation struct {
	// Steps holds one entry per route tried, in order, up to and including
	// the one that matched (every route when none did).
	Steps []Step
	// Route is the index of the matching route, or -1; Name is its name
	// and Pool its Target (-1 when none matched).
	Route int
	Name  string
	Pool  int
	// Path is the normalised request path; Target is what the backend
	// would get (path after any rewrite, and the query).
	Path, Target string
	// Redirect is the Location when the route redirects.
	Redirect string
	// RedirectStatus is the redirect's status.
	RedirectStatus int
	// Err is why the request would be refused with 400 (or a redirect
	// could not be built).
	Err error
}

// Step is one route's verdict.
type Step struct {
	Route   int
	Name    string
	Matched bool
	// Reasons lists every condition that failed, or, for the matching
	// route, every condition that held.
	Reasons []string
}

// Explain routes a request given as text: a method, a target (a path, "*",
// or an absolute http or https URL whose authority is the host when host is
// ""), a Host and header fields. It allocates; it is not for the request
// path.
func (t *Table) Explain(method, target, host string, headers [][2]string) Explanation {
	scheme := "http"
	for _, s := range []string{"http://", "https://"} {
		if len(target) > len(s) && strings.EqualFold(target[:len(s)], s) {
			scheme = s[:len(s)-3]
			rest := target[len(s):]
			end := strings.IndexAny(rest, "/?")
			if end < 0 {
				end = len(rest)
			}
			if host == "" {
				host = rest[:end]
			}
			target = rest[end:]
			if target == "" || target[0] == '?' {
				target = "/" + target
			}
		}
	}
	req := &h1.Request{Method: []byte(method), Target: []byte(target), Host: []byte(host)}
	for _, h := range headers {
		req.Fields = append(req.Fields, h1.Field{Name: []byte(h[0]), Value: []byte(h[1])})
	}
	m := Match{Secure: scheme == "https"}
	ok, err := t.Match(req, &m)
	e := Explanation{Route: -1, Pool: -1, Err: err}
	if err != nil {
		return e
	}
	e.Path, e.Target = string(m.Path()), string(m.Target())
	query := []byte(nil)
	if q := m.Query(); len(q) > 0 {
		query = q[1:]
	}
	for i := range t.routes {
		reasons, matched := t.routes[i].explain(req, &m, query)
		e.Steps = append(e.Steps, Step{Route: i, Name: t.routes[i].spec.Name, Matched: matched, Reasons: reasons})
		if matched || ok && i == m.Route {
			break
		}
	}
	if !ok {
		return e
	}
	r := &t.routes[m.Route]
	e.Route, e.Name, e.Pool = m.Route, r.spec.Name, r.spec.Target
	if r.spec.Redirect != nil {
		e.Pool = -1
		status, loc, _, err := t.Redirect(&m, req, scheme)
		e.RedirectStatus, e.Redirect, e.Err = status, string(loc), err
	}
	return e
}

// explain checks every condition of r, as Match does without its index,
// and says why each held or failed.
func (r *compiled) explain(req *h1.Request, m *Match, query []byte) (reasons []string, matched bool) {
	var ok, bad []string
	check := func(cond bool, yes, no string) {
		if cond {
			ok = append(ok, yes)
		} else {
			bad = append(bad, no)
		}
	}
	if r.spec.Scheme != "" {
		scheme := "http"
		if m.Secure {
			scheme = "https"
		}
		check(r.schemeOK(m.Secure), "scheme "+scheme+" is "+r.spec.Scheme, "scheme "+scheme+" is not "+r.spec.Scheme)
	}
	if len(r.hosts) > 0 {
		want := strings.Join(r.spec.Hosts, " or ")
		if !m.hostOK {
			bad = append(bad, fmt.Sprintf("request host %q is empty or malformed; the route needs host %s", req.Host, want))
		} else {
			hit := false
			for _, p := range r.hosts {
				hit = hit || hostMatches(m.host, p)
			}
			check(hit, fmt.Sprintf("host %s matches %s", m.host, want),
				fmt.Sprintf("host %s does not match %s", m.host, want))
		}
	}
	path := m.Path()
	star := string(path) == "*"
	if star && (r.path != "" || r.prefix != "") {
		bad = append(bad, "target * matches only routes without a path condition")
	} else {
		if r.path != "" {
			check(string(path) == r.path, fmt.Sprintf("path %s is %s", path, r.path),
				fmt.Sprintf("path %s is not %s", path, r.path))
		}
		if r.prefix != "" {
			check(hasSegmentPrefix(path, r.prefix), fmt.Sprintf("path %s is under %s", path, r.prefix),
				fmt.Sprintf("path %s is not under %s", path, r.prefix))
		}
	}
	if len(r.methods) > 0 {
		want := strings.Join(r.methods, " or ")
		check(r.methodOK(req.Method), fmt.Sprintf("method %s is %s", req.Method, want),
			fmt.Sprintf("method %s is not %s", req.Method, want))
	}
	for i := range r.headers {
		h := &r.headers[i]
		if h.Value == "" {
			check(headerOK(req.Fields, h), fmt.Sprintf("header %s is present", h.Name),
				fmt.Sprintf("header %s is absent", h.Name))
			continue
		}
		check(headerOK(req.Fields, h), fmt.Sprintf("header %s is %q", h.Name, h.Value),
			fmt.Sprintf("header %s is not %q (%s)", h.Name, h.Value, fieldValues(req.Fields, h.Name)))
	}
	for i := range r.query {
		q := &r.query[i]
		present := queryOK(query, &KV{Name: q.Name})
		switch {
		case !present:
			bad = append(bad, fmt.Sprintf("query parameter %s is absent", q.Name))
		case q.Value == "":
			ok = append(ok, fmt.Sprintf("query parameter %s is present", q.Name))
		default:
			check(queryOK(query, q), fmt.Sprintf("query parameter %s is %q", q.Name, q.Value),
				fmt.Sprintf("query parameter %s is not %q", q.Name, q.Value))
		}
	}
	if len(bad) > 0 {
		return bad, false
	}
	if len(ok) == 0 {
		ok = append(ok, "the route has no conditions")
	}
	return ok, true
}

// fieldValues lists the values of the fields named name, for a reason.
func fieldValues(fields []h1.Field, name string) string {
	var vs []string
	for i := range fields {
		if fields[i].Is(name) {
			vs = append(vs, fmt.Sprintf("%q", fields[i].Value))
		}
	}
	if len(vs) == 0 {
		return "absent"
	}
	return "sent " + strings.Join(vs, ", ")
}

// String renders the explanation as relay -explain prints it.
func (e Explanation) String() string {
	var b strings.Builder
	if e.Err != nil {
		fmt.Fprintf(&b, "refused: %v\n", e.Err)
		if e.Path == "" {
			return b.String()
		}
	}
	fmt.Fprintf(&b, "normalised path: %s\n", e.Path)
	for _, s := range e.Steps {
		verdict := "no match"
		if s.Matched {
			verdict = "MATCH"
		}
		fmt.Fprintf(&b, "%s (%s): %s\n", s.Name, verdict, strings.Join(s.Reasons, "; "))
	}
	switch {
	case e.Route < 0:
		b.WriteString("no route matches\n")
	case e.Redirect != "":
		fmt.Fprintf(&b, "route %s redirects: %d %s\n", e.Name, e.RedirectStatus, e.Redirect)
	default:
		fmt.Fprintf(&b, "route %s, pool %d, backend gets %s\n", e.Name, e.Pool, e.Target)
	}
	return b.String()
}
