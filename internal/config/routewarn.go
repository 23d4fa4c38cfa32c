package config

import (
	"fmt"
	"slices"
	"strings"
)

// routeWarnings are the warnings about routes and the pools they reach:
// a route an earlier one leaves no request to, a named pool no route
// sends requests to, a method that is not what it likely meant.
func (c *Config) routeWarnings() []Problem {
	var ws []Problem
	shadowed := make([]bool, len(c.Routes))
	for j := range c.Routes {
		b := &c.Routes[j]
		for i := range j {
			a := &c.Routes[i]
			if !covers(a.Match, b.Match) {
				continue
			}
			shadowed[j] = true
			ws = append(ws, Problem{File: c.Path, Line: b.Line, Key: fmt.Sprintf("routes[%d]", j),
				Msg: fmt.Sprintf("route %s can never match: route %s (line %d) comes first and takes every request it would%s; move it below, or narrow the earlier one",
					routeName(b), routeName(a), a.Line, coverHint(a.Match))})
			break
		}
		for k, m := range b.Match.Methods {
			if up := strings.ToUpper(m); up != m && slices.Contains(standardMethods, up) {
				line := b.lines["match.methods"]
				ws = append(ws, Problem{File: c.Path, Line: line, Key: fmt.Sprintf("routes[%d].match.methods[%d]", j, k),
					Msg: fmt.Sprintf("methods are case-sensitive: %s matches only requests whose method is %s, never %s", quote(m), quote(m), quote(up))})
			}
		}
	}
	for _, name := range c.PoolNames {
		var naming []string // the routes that name the pool, all shadowed
		reached := false
		for j, r := range c.Routes {
			if r.Pool != name {
				continue
			}
			if !shadowed[j] {
				reached = true
				break
			}
			naming = append(naming, routeName(&c.Routes[j]))
		}
		if reached {
			continue
		}
		msg := fmt.Sprintf("no route sends requests to pool %s; add a route with pool: %s, or remove the pool", name, name)
		if len(naming) > 0 {
			msg = fmt.Sprintf("no request reaches pool %s: the routes naming it (%s) can never match", name, strings.Join(naming, ", "))
		}
		ws = append(ws, Problem{File: c.Path, Line: c.Pools[name].line, Key: "pools." + name, Msg: msg})
	}
	return ws
}

// standardMethods are the methods of RFC 9110 and PATCH.
var standardMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// routeName names a route in a message: its name quoted, or routes[N].
func routeName(r *Route) string {
	if r.named {
		return quote(r.Name)
	}
	return r.Name
}

// coverHint says why an earlier route takes everything: it has no
// conditions at all.
func coverHint(m RouteMatch) string {
	if m.Empty() {
		return " (it has no match conditions)"
	}
	return ""
}

// covers reports whether every request b holds for, a holds for too:
// each condition a has, b has at least as narrow.
func covers(a, b RouteMatch) bool {
	if a.Scheme != "" && a.Scheme != b.Scheme {
		return false
	}
	if len(a.Hosts) > 0 {
		if len(b.Hosts) == 0 {
			return false
		}
		for _, bh := range b.Hosts {
			if !slices.ContainsFunc(a.Hosts, func(ah string) bool { return hostCovers(ah, bh) }) {
				return false
			}
		}
	}
	switch {
	case a.Path != "" && b.Path != a.Path:
		return false
	case a.PathPrefix != "":
		if !(b.Path != "" && prefixHolds(a.PathPrefix, b.Path) || b.PathPrefix != "" && prefixHolds(a.PathPrefix, b.PathPrefix)) {
			return false
		}
	}
	if len(a.Methods) > 0 {
		if len(b.Methods) == 0 {
			return false
		}
		for _, m := range b.Methods {
			if !slices.Contains(a.Methods, m) {
				return false
			}
		}
	}
	return valuesCover(a.Headers, b.Headers, strings.EqualFold) && valuesCover(a.Query, b.Query, func(x, y string) bool { return x == y })
}

// hostCovers reports whether every host pattern b holds for, pattern a
// holds for: the same pattern, or a wildcard whose domain b is under.
func hostCovers(a, b string) bool {
	if a == b {
		return true
	}
	domain, wild := strings.CutPrefix(a, "*")
	return wild && strings.HasSuffix(b, domain) && len(b) > len(domain)
}

// prefixHolds reports whether path_prefix p holds for path s, segment by
// segment: s is p, or continues it with "/" (or p ends with "/").
func prefixHolds(p, s string) bool {
	if !strings.HasPrefix(s, p) {
		return false
	}
	return len(s) == len(p) || strings.HasSuffix(p, "/") || s[len(p)] == '/'
}

// valuesCover reports whether each of a's conditions is one of b's or
// wider: the same name, with any value ("") or b's value.
func valuesCover(a, b []NameValue, same func(x, y string) bool) bool {
	for _, av := range a {
		if !slices.ContainsFunc(b, func(bv NameValue) bool {
			return same(av.Name, bv.Name) && (av.Value == "" || av.Value == bv.Value)
		}) {
			return false
		}
	}
	return true
}
