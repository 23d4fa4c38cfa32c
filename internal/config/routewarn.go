package config

import (
	"fmt"
	"slices"
	"strings"

	"relay/internal/route"
)

// routeWarnings are the warnings about routes and the pools they reach:
// a route an earlier one leaves no request to, a named pool no route
// sends requests to, a method that is not what it likely meant.
func (c *Config) routeWarnings() []Problem {
	var ws []Problem
	shadowed := make([]bool, len(c.Routes))
	specs := make([]route.Spec, len(c.Routes))
	for i := range c.Routes {
		specs[i] = c.Routes[i].Spec
	}
	for j, i := range route.Shadows(specs) {
		b := &c.Routes[j]
		if i >= 0 {
			a := &c.Routes[i]
			shadowed[j] = true
			ws = append(ws, Problem{File: c.Path, Line: b.Line, Key: fmt.Sprintf("routes[%d]", j),
				Msg: fmt.Sprintf("route %s can never match: route %s (line %d) comes first and takes every request it would%s; move it below, or narrow the earlier one",
					routeName(b), routeName(a), a.Line, coverHint(&a.Spec))})
		}
		for k, m := range b.Methods {
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
func coverHint(s *route.Spec) string {
	if len(s.Hosts) == 0 && s.PathPrefix == "" && s.Path == "" && len(s.Methods) == 0 &&
		len(s.Headers) == 0 && len(s.Query) == 0 && s.Scheme == "" {
		return " (it has no match conditions)"
	}
	return ""
}
