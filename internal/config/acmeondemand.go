package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ACMEOnDemand is ordering a certificate at the first handshake for a
// name relay has none for, as Caddy's on_demand_tls: only for names the
// rule admits, and at most PerMinute orders a minute.
type ACMEOnDemand struct {
	// Allow are the names a certificate may be ordered for: whole names
	// (shop.example.com) and patterns "*.example.com", where * stands
	// for exactly one label (a.example.com, not example.com nor
	// b.a.example.com). Lower case, without a trailing dot. Empty
	// leaves the decision to Ask alone.
	Allow []string
	// Ask is a URL relay asks before ordering: GET Ask?domain=NAME,
	// and only a 2xx answer lets the order go. "" asks nobody.
	Ask string
	// PerMinute caps the orders on demand begins in any minute, per
	// relay instance.
	PerMinute int
	// Line is the section's line in the file.
	Line int
}

// DefaultACMEOnDemandPerMinute is on_demand.per_minute's default.
const DefaultACMEOnDemandPerMinute = 10

var acmeOnDemandKeys = []string{"allow", "ask", "per_minute"}

// acmeOnDemand reads acme.on_demand.
func (d *decoder) acmeOnDemand(v *yaml.Node, a *ACME) {
	const path = "acme.on_demand"
	if isNull(v) {
		return
	}
	if v.Kind != yaml.MappingNode {
		d.problem(v.Line, path, `must be a mapping such as {allow: ["*.example.com"], ask: http://127.0.0.1:9000/check}, got %s`, describe(v))
		return
	}
	o := &ACMEOnDemand{PerMinute: DefaultACMEOnDemandPerMinute, Line: v.Line}
	d.mapping(v, path+".", acmeOnDemandKeys, func(key string, k, val *yaml.Node) {
		p := path + "." + key
		switch key {
		case "allow":
			items, ok := d.strList(val, p)
			if !ok {
				return
			}
			o.Allow = []string{}
			for i, it := range items {
				at := fmt.Sprintf("%s[%d]", p, i)
				name := strings.ToLower(strings.TrimSuffix(it.value, "."))
				if msg := checkOnDemandPattern(name); msg != "" {
					d.problem(it.line, at, "%s", msg)
					continue
				}
				if slices.Contains(o.Allow, name) {
					d.problem(it.line, at, "%s is listed twice", quote(name))
					continue
				}
				o.Allow = append(o.Allow, name)
			}
		case "ask":
			s, ok := d.str(val, p)
			if !ok {
				return
			}
			o.Ask = s
			if msg := checkAskURL(s); msg != "" {
				d.problem(val.Line, p, "%s", msg)
			}
		case "per_minute":
			n, ok := d.integer(val, p)
			if !ok {
				return
			}
			o.PerMinute = n
			if n < 1 {
				d.problem(val.Line, p, "must be at least 1 (the orders on demand may begin in a minute), got %d", n)
			}
		}
	})
	a.OnDemand = o
}

// checkOnDemandPattern says what is wrong with an entry of
// on_demand.allow, or "". A pattern "*.REST" admits the names of one
// label more than REST; any other star can match no name a CA issues
// for, which is said rather than left to refuse every handshake.
func checkOnDemandPattern(p string) string {
	rest, wild := strings.CutPrefix(p, "*.")
	if strings.Contains(rest, "*") || p == "*" {
		return fmt.Sprintf("%s matches no name relay could order: * stands for one whole label, the first, as in \"*.example.com\"", quote(p))
	}
	if msg := checkDomain(rest); msg != "" {
		if wild {
			return fmt.Sprintf("%s: after \"*.\", %s", quote(p), msg)
		}
		return msg
	}
	return ""
}

// checkAskURL says what is wrong with on_demand.ask, or "".
func checkAskURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return fmt.Sprintf("must be an http:// or https:// URL that relay asks with ?domain=NAME, got %s", quote(s))
	case u.Fragment != "":
		return fmt.Sprintf("%s has a fragment (#...), which is never sent", quote(s))
	case u.Query().Has("domain"):
		return fmt.Sprintf("%s sets domain= already; relay adds it", quote(s))
	}
	return ""
}

// checkACMEOnDemand judges on_demand against the rest of the file.
func (c *Config) checkACMEOnDemand(bad func(key, format string, args ...any)) {
	o := c.ACME.OnDemand
	if o == nil {
		return
	}
	if len(o.Allow) == 0 && o.Ask == "" {
		bad("acme.on_demand", "needs allow (names and \"*.example.com\" patterns), ask (a URL that approves each name), or both: unrestricted, any client could have relay order certificates for any name")
	}
}
