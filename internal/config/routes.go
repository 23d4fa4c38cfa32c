package config

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"relay/internal/compress"
)

// Route is one entry of routes: the requests it takes (Match, every
// condition given must hold) and what is done with them: forwarded to
// Pool, with the path and headers rewritten, or answered with Redirect
// by relay itself. The first route that matches a request takes it.
type Route struct {
	// Name is the route's name as the file gives it, else "routes[N]"
	// (N its index); names are unique. It labels metrics and log lines.
	Name string
	// Match says which requests the route takes; the zero value takes
	// every request.
	Match RouteMatch
	// Pool is the pool the route forwards to ("default" for the top
	// level's); "" when it redirects.
	Pool string
	// StripPrefix removes Match.PathPrefix from the path the backend
	// gets: with path_prefix /api, /api/users becomes /users and /api
	// becomes /.
	StripPrefix bool
	// ReplacePrefix, when not "", replaces Match.PathPrefix in the path
	// the backend gets: with path_prefix /api and replace_prefix /v2,
	// /api/users becomes /v2/users.
	ReplacePrefix string
	// RequestHeaders change the request before it is forwarded;
	// ResponseHeaders the response before it is sent to the client.
	RequestHeaders  HeaderActions
	ResponseHeaders HeaderActions
	// Redirect, when not nil, is answered by relay without a backend.
	Redirect *Redirect
	// RateLimit, when not nil, limits the requests the route takes,
	// before the limit of its pool.
	RateLimit *RateLimit
	// Compress, when not nil, compresses the route's responses in place
	// of its pool's compress section.
	Compress *compress.Config
	// Line is the YAML line of the route's entry.
	Line int

	named bool           // Name was given in the file
	lines map[string]int // the line of each key, "match.path_prefix" for nested ones
}

// RouteMatch holds a route's conditions; each one left at its zero value
// holds for every request.
type RouteMatch struct {
	// Hosts are host names, lower case, without a port: an exact name,
	// or "*." and a domain, which holds for every name ending in "." and
	// that domain (a.example.com and a.b.example.com for *.example.com,
	// not example.com itself). The request's Host header is compared
	// without its port and case-insensitively; one of them must hold.
	Hosts []string
	// PathPrefix holds for a path that is the prefix, or starts with the
	// prefix followed by "/" (or the prefix ends with "/"): /api holds
	// for /api, /api/ and /api/x, not /apix. Paths are compared after
	// normalisation (percent-encoding, dot segments, repeated slashes).
	PathPrefix string
	// Path holds for exactly this path, after normalisation.
	Path string
	// Methods are request methods, case-sensitive as HTTP's are; one of
	// them must be the request's.
	Methods []string
	// Headers are request header fields that must be present, each with
	// exactly Value, or with any value when Value is "". Names are
	// compared case-insensitively.
	Headers []NameValue
	// Query are query parameters that must be present, each with exactly
	// Value (after percent-decoding), or with any value when Value is "".
	Query []NameValue
	// Scheme, when not "", is the scheme the client used to reach relay:
	// "http" or "https" (TLS). It lets a redirect to https take only the
	// requests that came without TLS.
	Scheme string
}

// Empty reports whether m holds for every request.
func (m RouteMatch) Empty() bool {
	return len(m.Hosts) == 0 && m.PathPrefix == "" && m.Path == "" && len(m.Methods) == 0 &&
		len(m.Headers) == 0 && len(m.Query) == 0 && m.Scheme == ""
}

// NameValue is one header field or query parameter of a route, in the
// order of the file.
type NameValue struct {
	Name, Value string
}

// HeaderActions change a message's header fields: Remove first, then Set
// (replacing every field of that name), then Add (appending one more).
type HeaderActions struct {
	Set    []NameValue
	Add    []NameValue
	Remove []string
}

// Empty reports whether h changes nothing.
func (h HeaderActions) Empty() bool { return len(h.Set) == 0 && len(h.Add) == 0 && len(h.Remove) == 0 }

// Redirect is an answer relay gives itself: Status with a Location made
// of the request's URL with the parts given here replaced. Scheme ""
// keeps the request's; Host "" keeps the request's host; Port 0 keeps
// the request's port when neither Scheme nor Host is given, and leaves
// the port out (the scheme's default) when one of them is; Path ""
// keeps the request's path, after StripPrefix or ReplacePrefix. The
// query is kept.
type Redirect struct {
	Status int
	Scheme string
	Host   string
	Port   int
	Path   string
}

// DefaultRedirectStatus is a redirect's status when none is given.
const DefaultRedirectStatus = 302

// redirectStatuses are the statuses a redirect may answer with.
var redirectStatuses = []int{301, 302, 303, 307, 308}

var (
	routeKeys        = []string{"name", "match", "pool", "strip_prefix", "replace_prefix", "request_headers", "response_headers", "redirect", "rate_limit", "compress"}
	matchKeys        = []string{"host", "path_prefix", "path", "methods", "headers", "query", "scheme"}
	headerActionKeys = []string{"set", "add", "remove"}
	redirectKeys     = []string{"status", "scheme", "host", "port", "path"}
)

// decodeRoutes reads the routes list. Everything about a route but the
// pool it names is judged here, where each key's line is known; the pool
// is judged once the pools and flags are known (checkRoutes).
func decodeRoutes(d *decoder, c *Config, v *yaml.Node) {
	if v.Kind != yaml.SequenceNode {
		d.problem(v.Line, "routes", "must be a list of routes, each a mapping such as {match: {path_prefix: /api}, pool: api}, got %s", describe(v))
		return
	}
	names := map[string]int{}
	for i, item := range v.Content {
		item = resolve(item)
		at := fmt.Sprintf("routes[%d]", i)
		if item.Kind != yaml.MappingNode {
			d.problem(item.Line, at, "must be a mapping with match and pool (or redirect), got %s", describe(item))
			continue
		}
		r := d.route(item, at)
		r.Name = at
		if r.named {
			r.Name = r.nameGiven
		}
		if first, dup := names[r.Name]; dup {
			d.problem(r.lines["name"], at+".name", "route name %s is taken by the route at line %d; route names are unique", quote(r.Name), first)
		} else {
			names[r.Name] = r.Line
		}
		c.Routes = append(c.Routes, r.Route)
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
				if msg := checkRoutePath(s); msg != "" {
					d.problem(v.Line, path, "%s", msg)
					return
				}
				r.ReplacePrefix = normalizeRoutePath(s)
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
		}
	})
	d.routeRules(&r.Route, at)
	return r
}

// routeRules reports keys of one route that do not go together.
func (d *decoder) routeRules(r *Route, at string) {
	line := func(key string) int {
		if l := r.lines[key]; l > 0 {
			return l
		}
		return r.Line
	}
	_, poolSet := r.lines["pool"]
	_, redirectSet := r.lines["redirect"]
	switch {
	case poolSet && redirectSet:
		d.problem(line("redirect"), at+".redirect", "a route forwards to a pool or answers with a redirect, not both; remove pool (line %d) or redirect", line("pool"))
	case !poolSet && !redirectSet:
		d.problem(r.Line, at, "needs pool (where its requests go; %q for the top level's backends) or redirect (an answer relay gives itself)", DefaultPool)
	}
	if redirectSet && r.RateLimit != nil {
		d.problem(line("rate_limit"), at+".rate_limit", "a redirect is answered before any rate limit applies; rate_limit goes on routes with a pool")
	}
	rewrite := ""
	switch {
	case r.StripPrefix && r.ReplacePrefix != "":
		d.problem(line("replace_prefix"), at+".replace_prefix", "strip_prefix (line %d) and replace_prefix both rewrite match.path_prefix; keep one", line("strip_prefix"))
	case r.StripPrefix:
		rewrite = "strip_prefix"
	case r.ReplacePrefix != "":
		rewrite = "replace_prefix"
	}
	if rewrite != "" && r.Match.PathPrefix == "" {
		why := "this route has none"
		if r.Match.Path != "" {
			why = "this route matches an exact path; to send another path, use redirect with path, or a path_prefix"
		}
		d.problem(line(rewrite), at+"."+rewrite, "%s rewrites the part of the path match.path_prefix matched, and %s", rewrite, why)
	}
	if r.Match.Path != "" && r.Match.PathPrefix != "" {
		d.problem(line("match.path"), at+".match.path", "match.path and match.path_prefix (line %d) together: an exact path leaves nothing for a prefix to say; keep one", line("match.path_prefix"))
	}
	rd := r.Redirect
	if rd == nil {
		return
	}
	if !r.RequestHeaders.Empty() {
		d.problem(line("request_headers"), at+".request_headers", "a redirect forwards no request, so request_headers would change nothing; remove them (response_headers apply to the redirect)")
	}
	if rd.Path != "" && rewrite != "" {
		d.problem(line("redirect.path"), at+".redirect.path", "redirect.path replaces the whole path, so %s (line %d) would change nothing; keep one", rewrite, line(rewrite))
	}
	given := func(key string) bool { _, ok := r.lines["redirect."+key]; return ok }
	if !given("scheme") && !given("host") && !given("port") && !given("path") && rewrite == "" {
		d.problem(line("redirect"), at+".redirect", "changes nothing in the URL: a client would be sent to the URL it asked for, again and again; give scheme, host, port or path")
	}
	if rd.Scheme != "" && !given("host") && !given("path") && rewrite == "" && r.Match.Scheme != otherScheme(rd.Scheme) {
		d.problem(line("redirect.scheme"), at+".redirect.scheme", "a redirect to %s needs match.scheme: %s: without it, requests that came over %s would be sent to the URL they asked for, again and again",
			rd.Scheme, otherScheme(rd.Scheme), rd.Scheme)
	}
}

func otherScheme(s string) string {
	if s == "https" {
		return "http"
	}
	return "https"
}

// routeMatch decodes a route's match section into r.Match.
func (d *decoder) routeMatch(v *yaml.Node, at string, r *Route) {
	m := &r.Match
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
				h, msg := checkHostPattern(it.value)
				if msg != "" {
					d.problem(it.line, fmt.Sprintf("%s[%d]", path, i), "%s", msg)
					continue
				}
				if seen[h] {
					d.problem(it.line, fmt.Sprintf("%s[%d]", path, i), "%s is listed twice", quote(h))
					continue
				}
				seen[h] = true
				m.Hosts = append(m.Hosts, h)
			}
		case "path_prefix", "path":
			s, ok := d.str(val, path)
			if !ok {
				return
			}
			if msg := checkRoutePath(s); msg != "" {
				d.problem(val.Line, path, "%s", msg)
				return
			}
			if key == "path" {
				m.Path = normalizeRoutePath(s)
			} else {
				m.PathPrefix = normalizeRoutePath(s)
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
				switch {
				case !isToken(it.value):
					d.problem(it.line, fmt.Sprintf("%s[%d]", path, i), "%s is not a method name (letters, digits and !#$%%&'*+-.^_`|~)", quote(it.value))
				case seen[it.value]:
					d.problem(it.line, fmt.Sprintf("%s[%d]", path, i), "%s is listed twice", quote(it.value))
				default:
					seen[it.value] = true
					m.Methods = append(m.Methods, it.value)
				}
			}
		case "headers":
			m.Headers = d.fieldValues(val, path, func(name string) string {
				if !isToken(name) {
					return fmt.Sprintf("%s is not a header name (letters, digits and !#$%%&'*+-.^_`|~)", quote(name))
				}
				if strings.EqualFold(name, "Host") {
					return "the host is matched with match.host, which ignores the port and case and knows wildcards"
				}
				return ""
			}, true)
		case "query":
			m.Query = d.fieldValues(val, path, func(name string) string {
				if name == "" {
					return "a query parameter's name must not be empty"
				}
				return ""
			}, false)
		case "scheme":
			s, ok := d.str(val, path)
			if !ok {
				return
			}
			if s != "http" && s != "https" {
				d.problem(val.Line, path, `must be "http" or "https" (the scheme the client reached relay with), got %s%s`, quote(s), didYouMean(s, []string{"http", "https"}))
				return
			}
			m.Scheme = s
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
// parameters) in the order of the file. badName says what is wrong with
// a name, or ""; fold compares names case-insensitively, as header
// names are. A value left empty (X-Debug:) is "".
func (d *decoder) fieldValues(v *yaml.Node, path string, badName func(string) string, fold bool) []NameValue {
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, path, "must be a mapping of names to values (Name: value), got %s", describe(v))
		return nil
	}
	var out []NameValue
	seen := map[string]int{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := resolve(v.Content[i]), resolve(v.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.problem(k.Line, path, "names must be plain strings, got %s", describe(k))
			continue
		}
		name, at := k.Value, path+"."+k.Value
		if msg := badName(name); msg != "" {
			d.problem(k.Line, at, "%s", msg)
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
			out = append(out, NameValue{Name: name, Value: value})
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
	if msg := checkFieldValue(v.Value); msg != "" {
		d.problem(v.Line, at, "%s", msg)
		return "", false
	}
	return v.Value, true
}

// headerActions decodes request_headers or response_headers.
func (d *decoder) headerActions(v *yaml.Node, at string) HeaderActions {
	var h HeaderActions
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
			for _, nv := range d.fieldValues(val, path, settableHeader, key == "set") {
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
				if msg := settableHeader(it.value); msg != "" {
					d.problem(it.line, p, "%s", msg)
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
func (d *decoder) redirect(v *yaml.Node, at string, lines map[string]int) *Redirect {
	rd := &Redirect{Status: DefaultRedirectStatus}
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
				if !slices.Contains(redirectStatuses, n) {
					d.problem(val.Line, path, "%d is not a redirect status; use 301 or 308 (permanent), 302, 303 or 307 (temporary; 307 and 308 keep the method and body)", n)
				}
			}
		case "scheme":
			if s, ok := d.str(val, path); ok {
				if s != "http" && s != "https" {
					d.problem(val.Line, path, `must be "http" or "https", got %s%s`, quote(s), didYouMean(s, []string{"http", "https"}))
					return
				}
				rd.Scheme = s
			}
		case "host":
			if s, ok := d.str(val, path); ok {
				h, msg := checkRedirectHost(s)
				if msg != "" {
					d.problem(val.Line, path, "%s", msg)
					return
				}
				rd.Host = h
			}
		case "port":
			if n, ok := d.integer(val, path); ok {
				if n < 1 || n > 65535 {
					d.problem(val.Line, path, "must be between 1 and 65535, got %d", n)
					return
				}
				rd.Port = n
			}
		case "path":
			if s, ok := d.str(val, path); ok {
				if msg := checkRoutePath(s); msg != "" {
					d.problem(val.Line, path, "%s", msg)
					return
				}
				rd.Path = normalizeRoutePath(s)
			}
		}
	})
	return rd
}

// escapedSlashesValues are what escaped_slashes takes.
var escapedSlashesValues = []string{"reject", "decode", "keep"}

// checkRoutes reports what routes say about the rest of the file: the
// pools they name, which exist only once pools and flags are known, and
// paths holding an escaped slash that escaped_slashes never lets through.
func (c *Config) checkRoutes(errs *Errors, bad func(key, format string, args ...any)) {
	if !slices.Contains(escapedSlashesValues, c.EscapedSlashes) {
		bad("escaped_slashes", "must be one of reject, decode, keep; got %s%s", quote(c.EscapedSlashes), didYouMean(c.EscapedSlashes, escapedSlashesValues))
	}
	known := make([]string, 0, len(c.PoolNames)+1)
	if c.HasDefaultPool() {
		known = append(known, DefaultPool)
	}
	known = append(known, c.PoolNames...)
	for i, r := range c.Routes {
		at := func(key string) Problem {
			line := r.lines[key]
			if line == 0 {
				line = r.Line
			}
			return Problem{File: c.Path, Line: line, Key: fmt.Sprintf("routes[%d].%s", i, key)}
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
		if c.EscapedSlashes == "keep" {
			continue
		}
		for _, f := range []struct{ key, path string }{{"match.path_prefix", r.Match.PathPrefix}, {"match.path", r.Match.Path}} {
			if escapedSlash(f.path) {
				p := at(f.key)
				p.Msg = fmt.Sprintf("%s holds an escaped slash (%%2F or %%5C), which a request path has when it is matched only with escaped_slashes: keep (it is %s)", quote(f.path), c.EscapedSlashes)
				errs.add(p)
			}
		}
		// A path relay writes is held to the same form: a rewrite must
		// not give a backend an escaped slash that escaped_slashes keeps
		// away from it in every request path (the route table refuses
		// one, so a file that held one would pass -check and a reload
		// here and then be refused by every serving process).
		written := []struct{ key, path string }{{"replace_prefix", r.ReplacePrefix}}
		if r.Redirect != nil {
			written = append(written, struct{ key, path string }{"redirect.path", r.Redirect.Path})
		}
		for _, f := range written {
			if escapedSlash(f.path) {
				p := at(f.key)
				p.Msg = fmt.Sprintf("%s holds an escaped slash (%%2F or %%5C), which relay gives a backend or a client only with escaped_slashes: keep (it is %s)", quote(f.path), c.EscapedSlashes)
				errs.add(p)
			}
		}
	}
}
