package config

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"relay/internal/compress"
	"relay/internal/route"
)

// Route is one entry of routes: the requests it takes (the Spec's
// conditions, every one given must hold) and what is done with them:
// forwarded to Pool, with the path and headers rewritten, or answered
// with the Spec's Redirect by relay itself. The first route that matches
// a request takes it.
type Route struct {
	// Spec is the route as the route table takes it, in the form the
	// rules of internal/route leave it (host patterns in lower case,
	// paths in normal form), each part judged by those rules: its Name
	// (as the file gives it, else "routes[N]"; names are unique, and label
	// metrics and log lines), conditions, rewrite, header changes and
	// Redirect (its Status DefaultRedirectStatus when the file gives
	// none). Its Target is the data plane's to set.
	route.Spec
	// Pool is the pool the route forwards to ("default" for the top
	// level's); "" when it redirects.
	Pool string
	// RateLimit, when not nil, limits the requests the route takes,
	// before the limit of its pool.
	RateLimit *RateLimit
	// Compress, when not nil, compresses the route's responses in place
	// of its pool's compress section.
	Compress *compress.Config
	// ClientCertHeaders and ClientCertPEM, when set, say what the route's
	// backend is told of a client certificate in place of the top
	// level's client_cert_headers and client_cert_pem.
	ClientCertHeaders string
	ClientCertPEM     *bool
	// Line is the YAML line of the route's entry.
	Line int

	named bool           // Name was given in the file
	lines map[string]int // the line of each key, "match.path_prefix" for nested ones
}

// DefaultRedirectStatus is a redirect's status when none is given.
const DefaultRedirectStatus = 302

var (
	routeKeys        = []string{"name", "match", "pool", "strip_prefix", "replace_prefix", "request_headers", "response_headers", "redirect", "rate_limit", "compress", "client_cert_headers", "client_cert_pem"}
	matchKeys        = []string{"host", "path_prefix", "path", "methods", "headers", "query", "scheme"}
	headerActionKeys = []string{"set", "add", "remove"}
	redirectKeys     = []string{"status", "scheme", "host", "port", "path"}
)

// decodeRoutes reads the routes list. Each value is judged by the rules
// of internal/route as it is read, where its line is known; how a route's
// parts go together, the pool it names and its paths against
// escaped_slashes are judged once the whole file is known (checkRoutes).
func decodeRoutes(d *decoder, c *Config, v *yaml.Node) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v.Line, "routes", "must be a list of routes, each a mapping such as {match: {path_prefix: /api}, pool: api}, got %s", describe(v))
		return
	}
	for i, item := range v.Content {
		item = resolve(item)
		at := fmt.Sprintf("routes[%d]", i)
		if item.Kind != yaml.MappingNode {
			d.problem(item.Line, at, "must be a mapping with match and pool (or redirect), got %s", describe(item))
			continue
		}
		r := d.route(item, at)
		r.Name = route.Name(r.nameGiven, i)
		c.Routes = append(c.Routes, r.Route)
	}
	specs := make([]route.Spec, len(c.Routes))
	for i := range c.Routes {
		specs[i] = c.Routes[i].Spec
	}
	for i, j := range route.Taken(specs) {
		if j >= 0 {
			r := &c.Routes[i]
			d.problem(r.lines["name"], fmt.Sprintf("routes[%d].name", i), "route name %s is taken by the route at line %d; route names are unique", quote(r.Name), c.Routes[j].Line)
		}
	}
}

// decodedRoute is a Route with what decoding it learnt.
type decodedRoute struct {
	Route
	nameGiven string
}

// route decodes one entry of routes and judges it on its own.
func (d *decoder) route(item *yaml.Node, at string) decodedRoute {
	r := decodedRoute{Route: Route{Line: item.Line, lines: map[string]int{}}}
	d.mapping(item, at+".", routeKeys, func(key string, k, v *yaml.Node) {
		r.lines[key] = k.Line
		if isNull(v) {
			return
		}
		path := at + "." + key
		switch key {
		case "name":
			if s, ok := d.str(v, path); ok {
				if !poolName.MatchString(s) {
					d.problem(v.Line, path, "route names are 1 to 64 of a-z, 0-9, _ and -, starting with a letter or digit (they become metric labels), got %s", quote(s))
					return
				}
				r.named, r.nameGiven = true, s
			}
		case "match":
			if v.Kind != yaml.MappingNode {
				d.problem(v.Line, path, "must be a mapping of conditions (host:, path_prefix:, methods:, ...), got %s", describe(v))
				return
			}
			d.routeMatch(v, path, &r.Route)
		case "pool":
			if s, ok := d.str(v, path); ok {
				if s == "" {
					d.problem(v.Line, path, "must not be empty: name a pool, or %q for the top level's", DefaultPool)
					return
				}
				r.Pool = s
			}
		case "strip_prefix":
			if b, ok := d.boolean(v, path); ok {
				r.StripPrefix = b
			}
		case "replace_prefix":
			if s, ok := d.str(v, path); ok {
				if s == "" {
					d.problem(v.Line, path, "is empty; to remove match.path_prefix from the path, set strip_prefix: true")
					return
				}
				if r.ReplacePrefix, ok = d.routePath(v, path, s); ok {
					r.Replace = true
				}
			}
		case "request_headers":
			r.RequestHeaders = d.headerActions(v, path)
		case "response_headers":
			r.ResponseHeaders = d.headerActions(v, path)
		case "redirect":
			r.Redirect = d.redirect(v, path, r.lines)
		case "rate_limit":
			r.RateLimit = d.rateLimit(v, path)
		case "compress":
			r.Compress = d.compress(v, path)
		case "client_cert_headers":
			if s, ok := d.str(v, path); ok {
				r.ClientCertHeaders = s
			}
		case "client_cert_pem":
			if b, ok := d.boolean(v, path); ok {
				r.ClientCertPEM = &b
			}
		}
	})
	d.routeRules(&r.Route, at)
	return r
}

// line is the line of the route's key, else of the route.
func (r *Route) line(key string) int {
	if l := r.lines[key]; l > 0 {
		return l
	}
	return r.Line
}

// routeRules reports keys of one route that do not go together as a file
// should say them: a pool and a redirect, or neither; a rate limit on a
// redirect; conditions or changes that would say nothing; a redirect to
// the URL asked for. A route table could be built from most of these;
// what it could not be built from is route.Spec.Check's, in checkRoutes.
func (d *decoder) routeRules(r *Route, at string) {
	_, poolSet := r.lines["pool"]
	_, redirectSet := r.lines["redirect"]
	switch {
	case poolSet && redirectSet:
		d.problem(r.line("redirect"), at+".redirect", "a route forwards to a pool or answers with a redirect, not both; remove pool (line %d) or redirect", r.line("pool"))
	case !poolSet && !redirectSet:
		d.problem(r.Line, at, "needs pool (where its requests go; %q for the top level's backends) or redirect (an answer relay gives itself)", DefaultPool)
	}
	if redirectSet && r.RateLimit != nil {
		d.problem(r.line("rate_limit"), at+".rate_limit", "a redirect is answered before any rate limit applies; rate_limit goes on routes with a pool")
	}
	if r.Path != "" && r.PathPrefix != "" {
		d.problem(r.line("match.path"), at+".match.path", "match.path and match.path_prefix (line %d) together: an exact path leaves nothing for a prefix to say; keep one", r.line("match.path_prefix"))
	}
	rd := r.Redirect
	if rd == nil {
		return
	}
	rewrite := r.Rewrite()
	if !r.RequestHeaders.Empty() {
		d.problem(r.line("request_headers"), at+".request_headers", "a redirect forwards no request, so request_headers would change nothing; remove them (response_headers apply to the redirect)")
	}
	if rd.Path != "" && rewrite != "" {
		d.problem(r.line("redirect.path"), at+".redirect.path", "redirect.path replaces the whole path, so %s (line %d) would change nothing; keep one", rewrite, r.line(rewrite))
	}
	// These two judge the keys the file wrote: one written with no value
	// counts, as it does not leave the redirect to itself unnoticed.
	given := func(key string) bool { _, ok := r.lines["redirect."+key]; return ok }
	if !given("scheme") && !given("host") && !given("port") && !given("path") && rewrite == "" {
		d.problem(r.line("redirect"), at+".redirect", "changes nothing in the URL: a client would be sent to the URL it asked for, again and again; give scheme, host, port or path")
	}
	if rd.Scheme != "" && !given("host") && !given("path") && rewrite == "" && r.Scheme != otherScheme(rd.Scheme) {
		d.problem(r.line("redirect.scheme"), at+".redirect.scheme", "a redirect to %s needs match.scheme: %s: without it, requests that came over %s would be sent to the URL they asked for, again and again",
			rd.Scheme, otherScheme(rd.Scheme), rd.Scheme)
	}
}

func otherScheme(s string) string {
	if s == "https" {
		return "http"
	}
	return "https"
}

// routePath judges s, the path at path (v's value), by route.Path and
// returns its normal form.
func (d *decoder) routePath(v *yaml.Node, path, s string) (string, bool) {
	n, err := route.Path(s)
	if err != nil {
		d.problem(v.Line, path, "%v", err)
		return "", false
	}
	return n, true
}

// routeMatch decodes a route's match section into r's conditions.
func (d *decoder) routeMatch(v *yaml.Node, at string, r *Route) {
	d.mapping(v, at+".", matchKeys, func(key string, k, val *yaml.Node) {
		r.lines["match."+key] = k.Line
		path := at + "." + key
		if isNull(val) {
			d.problem(k.Line, path, "has no value; leave it out to match every request")
			return
		}
		switch key {
		case "host":
			items, ok := d.oneOrList(val, path)
			if !ok {
				return
			}
			if len(items) == 0 {
				d.problem(val.Line, path, "is empty; leave host out to match every host")
			}
			seen := map[string]bool{}
			for i, it := range items {
				at := fmt.Sprintf("%s[%d]", path, i)
				h, err := route.HostPattern(it.value)
				switch {
				case err != nil:
					d.problem(it.line, at, "%v", err)
					continue
				case strings.HasSuffix(it.value, "."):
					// The same host as without the dot, which is how the
					// file says it.
					d.problem(it.line, at, "%s ends with a dot; write it without the dot", quote(it.value))
					continue
				case strings.HasPrefix(h, "*.") && !strings.Contains(h[2:], ".") && h != "*.localhost":
					// *.com would take a whole top-level domain; nobody
					// means that.
					d.problem(it.line, at, "%s: a wildcard needs a domain of at least two labels after \"*.\", such as *.example.com", quote(it.value))
					continue
				case seen[h]:
					d.problem(it.line, at, "%s is listed twice", quote(h))
					continue
				}
				seen[h] = true
				r.Hosts = append(r.Hosts, h)
			}
		case "path_prefix", "path":
			s, ok := d.str(val, path)
			if !ok {
				return
			}
			if n, ok := d.routePath(val, path, s); ok && key == "path" {
				r.Path = n
			} else if ok {
				r.PathPrefix = n
			}
		case "methods":
			items, ok := d.oneOrList(val, path)
			if !ok {
				return
			}
			if len(items) == 0 {
				d.problem(val.Line, path, "is empty; leave methods out to match every method")
			}
			seen := map[string]bool{}
			for i, it := range items {
				if err := route.Method(it.value); err != nil {
					d.problem(it.line, fmt.Sprintf("%s[%d]", path, i), "%v", err)
				} else if seen[it.value] {
					d.problem(it.line, fmt.Sprintf("%s[%d]", path, i), "%s is listed twice", quote(it.value))
				} else {
					seen[it.value] = true
					r.Methods = append(r.Methods, it.value)
				}
			}
		case "headers":
			r.Headers = d.fieldValues(val, path, route.HeaderCondition, true)
		case "query":
			r.Query = d.fieldValues(val, path, route.QueryCondition, false)
		case "scheme":
			s, ok := d.str(val, path)
			if !ok {
				return
			}
			if err := route.Scheme(s); err != nil {
				d.problem(val.Line, path, "%v%s", err, didYouMean(s, route.Schemes))
				return
			}
			r.Scheme = s
		}
	})
}

// oneOrList decodes a string or a list of strings.
func (d *decoder) oneOrList(v *yaml.Node, path string) ([]listItem, bool) {
	if v.Kind == yaml.ScalarNode {
		s, ok := d.str(v, path)
		if !ok {
			return nil, false
		}
		return []listItem{{value: s, line: v.Line}}, true
	}
	return d.strList(v, path)
}

// fieldValues decodes a mapping of names to values (header fields, query
// parameters) in the order of the file. badName is the rule of a name;
// fold compares names case-insensitively, as header names are. A value
// left empty (X-Debug:) is "".
func (d *decoder) fieldValues(v *yaml.Node, path string, badName func(string) error, fold bool) []route.KV {
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, path, "must be a mapping of names to values (Name: value), got %s", describe(v))
		return nil
	}
	var out []route.KV
	seen := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.problem(k.Line, path, "names must be plain strings, got %s", describe(k))
			continue
		}
		name, at := k.Value, path+"."+k.Value
		if err := badName(name); err != nil {
			d.problem(k.Line, at, "%v", err)
			continue
		}
		id := name
		if fold {
			id = strings.ToLower(name)
		}
		if first, dup := seen[id]; dup {
			d.problem(k.Line, at, "set twice (first at line %d)", first)
			continue
		}
		seen[id] = k.Line
		value, ok := d.fieldValue(val, at)
		if ok {
			out = append(out, route.KV{Name: name, Value: value})
		}
	}
	return out
}

// fieldValue reads one header or query value: any scalar, as written;
// nothing is "".
func (d *decoder) fieldValue(v *yaml.Node, at string) (string, bool) {
	if isNull(v) {
		return "", true
	}
	if v.Kind != yaml.ScalarNode {
		d.problem(v.Line, at, "must be a plain value, got %s", describe(v))
		return "", false
	}
	if err := route.FieldValue(v.Value); err != nil {
		d.problem(v.Line, at, "%v", err)
		return "", false
	}
	return v.Value, true
}

// headerActions decodes request_headers or response_headers.
func (d *decoder) headerActions(v *yaml.Node, at string) route.HeaderOps {
	var h route.HeaderOps
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, at, "must be a mapping with set, add and remove, got %s", describe(v))
		return h
	}
	lines := map[string]int{}      // a name's line, by its lower case
	actions := map[string]string{} // the action a name first had
	claim := func(name, action string, line int, path string) bool {
		id := strings.ToLower(name)
		if first, dup := actions[id]; dup && (first != action || action == "remove") {
			d.problem(line, path, "%s is also in %s (line %d); each field gets one action", quote(name), first, lines[id])
			return false
		}
		actions[id], lines[id] = action, line
		return true
	}
	d.mapping(v, at+".", headerActionKeys, func(key string, k, val *yaml.Node) {
		path := at + "." + key
		if isNull(val) {
			return
		}
		switch key {
		case "set", "add":
			for _, nv := range d.fieldValues(val, path, route.HeaderChange, key == "set") {
				if claim(nv.Name, key, lineOf(val, nv.Name), path+"."+nv.Name) {
					if key == "set" {
						h.Set = append(h.Set, nv)
					} else {
						h.Add = append(h.Add, nv)
					}
				}
			}
		case "remove":
			items, ok := d.oneOrList(val, path)
			if !ok {
				return
			}
			for i, it := range items {
				p := fmt.Sprintf("%s[%d]", path, i)
				if err := route.HeaderChange(it.value); err != nil {
					d.problem(it.line, p, "%v", err)
					continue
				}
				if claim(it.value, "remove", it.line, p) {
					h.Remove = append(h.Remove, it.value)
				}
			}
		}
	})
	return h
}

// lineOf is the line of key in mapping m.
func lineOf(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if k := resolve(m.Content[i]); k.Value == key {
			return k.Line
		}
	}
	return m.Line
}

// redirect decodes a route's redirect section.
func (d *decoder) redirect(v *yaml.Node, at string, lines map[string]int) *route.Redirect {
	rd := &route.Redirect{Status: DefaultRedirectStatus}
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, at, "must be a mapping with status, scheme, host, port and path, got %s", describe(v))
		return rd
	}
	d.mapping(v, at+".", redirectKeys, func(key string, k, val *yaml.Node) {
		lines["redirect."+key] = k.Line
		path := at + "." + key
		if isNull(val) {
			return
		}
		switch key {
		case "status":
			if n, ok := d.integer(val, path); ok {
				rd.Status = n
				if err := route.RedirectStatus(n); err != nil {
					d.problem(val.Line, path, "%v", err)
				}
			}
		case "scheme":
			if s, ok := d.str(val, path); ok {
				if err := route.RedirectScheme(s); err != nil {
					d.problem(val.Line, path, "%v%s", err, didYouMean(s, route.Schemes))
					return
				}
				rd.Scheme = s
			}
		case "host":
			if s, ok := d.str(val, path); ok {
				h, err := route.RedirectHost(s)
				if err != nil {
					d.problem(val.Line, path, "%v", err)
					return
				}
				rd.Host = h
			}
		case "port":
			if n, ok := d.integer(val, path); ok {
				if err := route.RedirectPort(n); err != nil {
					d.problem(val.Line, path, "%v", err)
					return
				}
				rd.Port = n
			}
		case "path":
			if s, ok := d.str(val, path); ok {
				rd.Path, _ = d.routePath(val, path, s)
			}
		}
	})
	return rd
}

// EscapedSlashesMode is the route table's form of escaped_slashes, which
// the file's checks passed.
func (c *Config) EscapedSlashesMode() route.EscapedSlashes {
	m, _ := route.ParseEscapedSlashes(c.EscapedSlashes)
	return m
}

// checkRoutes reports what routes say about the rest of the file: the
// pools they name, which exist only once pools and flags are known, and
// what route.Spec.Check finds in each route, whose paths escaped_slashes
// judges.
func (c *Config) checkRoutes(errs *Errors, bad func(key, format string, args ...any)) {
	mode, ok := route.ParseEscapedSlashes(c.EscapedSlashes)
	if !ok {
		names := make([]string, len(route.EscapedSlashesModes))
		for i, m := range route.EscapedSlashesModes {
			names[i] = m.String()
		}
		bad("escaped_slashes", "must be one of %s; got %s%s", strings.Join(names, ", "), quote(c.EscapedSlashes), didYouMean(c.EscapedSlashes, names))
		// Paths are not judged against a mode the file does not give.
		mode = route.Keep
	}
	known := make([]string, 0, len(c.PoolNames)+1)
	if c.HasDefaultPool() {
		known = append(known, DefaultPool)
	}
	known = append(known, c.PoolNames...)
	for i := range c.Routes {
		r := &c.Routes[i]
		at := func(key string) Problem {
			return Problem{File: c.Path, Line: r.line(key), Key: fmt.Sprintf("routes[%d].%s", i, key)}
		}
		switch {
		case r.Pool == "":
		case r.Pool == DefaultPool && !c.HasDefaultPool():
			p := at("pool")
			p.Msg = fmt.Sprintf("pool %q is the top level's backends, and the top level lists none; name one of the pools (%s) or list backends at the top level", DefaultPool, strings.Join(c.PoolNames, ", "))
			errs.add(p)
		case r.Pool != DefaultPool && c.Pools[r.Pool] == nil:
			p := at("pool")
			if len(known) == 0 {
				p.Msg = fmt.Sprintf("unknown pool %s; there are no pools: list them under pools:", quote(r.Pool))
			} else {
				p.Msg = fmt.Sprintf("unknown pool %s; pools: %s", quote(r.Pool), strings.Join(known, ", "))
				if sug := closest(r.Pool, known); sug != "" {
					p.Msg = fmt.Sprintf("unknown pool %s; did you mean %q? pools: %s", quote(r.Pool), sug, strings.Join(known, ", "))
				}
			}
			errs.add(p)
		}
		cite := func(key string) string { return fmt.Sprintf("%s (line %d)", key, r.line(key)) }
		for _, rp := range r.Check(mode, cite) {
			p := at(rp.Key)
			p.Msg = rp.Msg
			errs.add(p)
		}
	}
}
