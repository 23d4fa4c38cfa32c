package route

import (
	"slices"
	"strings"
)

// covers reports whether every request b holds for, a holds for too:
// each condition a has, b has at least as narrow.
func covers(a, b *Spec) bool {
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
		if !(b.Path != "" && hasSegmentPrefix([]byte(b.Path), a.PathPrefix) || b.PathPrefix != "" && hasSegmentPrefix([]byte(b.PathPrefix), a.PathPrefix)) {
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

// valuesCover reports whether each of a's conditions is one of b's or
// wider: the same name, with any value ("") or b's value.
func valuesCover(a, b []KV, same func(x, y string) bool) bool {
	for _, av := range a {
		if !slices.ContainsFunc(b, func(bv KV) bool {
			return same(av.Name, bv.Name) && (av.Value == "" || av.Value == bv.Value)
		}) {
			return false
		}
	}
	return true
}

// Shadows returns, for each route, the first earlier route that takes
// every request it would (so it can never match), or -1. The specs are in
// the form Check and the rules of rules.go leave them: host patterns in
// lower case, paths in normal form.
func Shadows(routes []Spec) []int {
	by := make([]int, len(routes))
	idx := newCoverIndex(routes)
	var cand []int
	for j := range routes {
		by[j] = -1
		cand = idx.candidates(&routes[j], j, cand[:0])
		for _, i := range cand {
			if covers(&routes[i], &routes[j]) {
				by[j] = i
				break
			}
		}
	}
	return by
}

// coverIndex files routes by what covers asks of them first, so that a
// route is compared only with the earlier routes that might take every
// request it would: a table of thousands of host and path rules is
// checked at start and at every reload, and comparing every pair of its
// routes took seconds. A route with hosts is filed under each of its host
// patterns, with its path or path prefix; one without, under its path or
// path prefix alone; one with neither, as generic (compared with every
// later route).
type coverIndex struct {
	keyed   map[string][]int // ascending route indexes by key (coverKey)
	generic []int
}

// coverKey files a route: kind 'h' (a host pattern only), 'p' (an exact
// path, under a host pattern or "" for none) or 'P' (a path prefix).
func coverKey(kind byte, host, path string) string {
	return string(kind) + host + "\x00" + path
}

func newCoverIndex(routes []Spec) *coverIndex {
	x := &coverIndex{keyed: map[string][]int{}}
	for i := range routes {
		m := &routes[i]
		hosts := m.Hosts
		if len(hosts) == 0 {
			hosts = []string{""}
		}
		for _, h := range hosts {
			var k string
			switch {
			case m.Path != "":
				k = coverKey('p', h, m.Path)
			case m.PathPrefix != "":
				k = coverKey('P', h, m.PathPrefix)
			case h != "":
				k = coverKey('h', h, "")
			default:
				x.generic = append(x.generic, i)
				continue
			}
			if l := x.keyed[k]; len(l) == 0 || l[len(l)-1] != i {
				x.keyed[k] = append(l, i)
			}
		}
	}
	return x
}

// candidates appends to out, ascending, the routes before route j that
// may cover b: the only ones covers can hold for.
func (x *coverIndex) candidates(b *Spec, j int, out []int) []int {
	// A route with hosts covers b only if one of its patterns covers
	// b's first host: that host itself, or a wildcard of one of its
	// domains. A route without hosts may cover any b.
	hosts := []string{""}
	if len(b.Hosts) > 0 {
		bh := b.Hosts[0]
		hosts = append(hosts, bh)
		for i := 1; i < len(bh); i++ {
			if bh[i] == '.' {
				hosts = append(hosts, "*"+bh[i:])
			}
		}
	}
	add := func(k string) {
		for _, i := range x.keyed[k] {
			if i >= j {
				break
			}
			out = append(out, i)
		}
	}
	for _, h := range hosts {
		if h != "" {
			add(coverKey('h', h, ""))
		}
		if b.Path != "" {
			add(coverKey('p', h, b.Path))
		}
		// A prefix holds for s when it is s, or s up to one of its
		// slashes, with or without that slash.
		for _, s := range []string{b.Path, b.PathPrefix} {
			if s == "" {
				continue
			}
			add(coverKey('P', h, s))
			for i := 0; i < len(s); i++ {
				if s[i] == '/' {
					if i > 0 {
						add(coverKey('P', h, s[:i]))
					}
					add(coverKey('P', h, s[:i+1]))
				}
			}
		}
	}
	for _, i := range x.generic {
		if i >= j {
			break
		}
		out = append(out, i)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
