package route

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The index that picks which earlier routes may cover a route finds the
// same first covering route as comparing every pair does, on tables drawn
// from a small vocabulary so that routes overlap often.
func TestShadowsAgreeWithEveryPair(t *testing.T) {
	hosts := []string{"a.test", "b.a.test", "*.a.test", "*.test", "*.b.a.test", "c.test"}
	paths := []string{"/", "/x", "/x/", "/x/y", "/x/y/", "/xy", "/x/y/z"}
	methods := []string{"GET", "POST"}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(l []string, most int) []string {
		var out []string
		for range rng.IntN(most + 1) {
			out = append(out, l[rng.IntN(len(l))])
		}
		return out
	}
	for round := range 300 {
		routes := make([]Spec, 2+rng.IntN(12))
		for i := range routes {
			m := Spec{Hosts: pick(hosts, 2), Methods: pick(methods, 1)}
			switch rng.IntN(4) {
			case 1:
				m.Path = paths[rng.IntN(len(paths))]
			case 2:
				m.PathPrefix = paths[rng.IntN(len(paths))]
			case 3:
				m.Path, m.PathPrefix = paths[rng.IntN(len(paths))], paths[rng.IntN(len(paths))]
			}
			if rng.IntN(4) == 0 {
				m.Scheme = "https"
			}
			routes[i] = m
		}
		got := Shadows(routes)
		for j := range routes {
			want := -1
			for i := range j {
				if covers(&routes[i], &routes[j]) {
					want = i
					break
				}
			}
			if got[j] != want {
				t.Fatalf("round %d: route %d %+v: shadowed by %d, want %d (routes %+v)", round, j, routes[j], got[j], want, routes)
			}
		}
	}
}

// A large ingress's table (a host and a path prefix per route, as
// bench/routes-config.sh writes, many of them under one host) is checked
// at start and at every reload: comparing every pair of 20,000 routes
// took about 5 s; the index keeps it well under a second (the bound
// leaves room for a slow, shared machine).
func TestShadowsOfALargeTable(t *testing.T) {
	const n = 20000
	routes := make([]Spec, n)
	for i := range routes {
		host := fmt.Sprintf("svc%d.example.com", i)
		if i%2 == 0 {
			host = "api.example.com"
		}
		routes[i] = Spec{Hosts: []string{host}, PathPrefix: fmt.Sprintf("/api%d", i)}
	}
	routes[n-1] = Spec{Hosts: []string{"api.example.com"}, PathPrefix: "/api2/x"}
	start := time.Now()
	by := Shadows(routes)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shadows of %d routes took %v", n, d)
	}
	for j, i := range by[:n-1] {
		if i >= 0 {
			t.Fatalf("route %d shadowed by %d", j, i)
		}
	}
	if by[n-1] != 2 {
		t.Errorf("the last route is shadowed by %d, want 2", by[n-1])
	}
}

// A route Shadows says an earlier one takes every request of is never
// the route Match chooses, on random tables and requests: Shadows and
// matching state the same rules for hosts, paths, methods and schemes.
func TestShadowedRoutesNeverMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	hosts := []string{"a.test", "b.a.test", "c.b.a.test", "x.test", "test"}
	patterns := []string{"a.test", "*.a.test", "*.b.a.test", "*.test", "x.test", "test"}
	paths := []string{"/", "/a", "/a/b", "/b", "/a/"}
	methods := []string{"GET", "POST"}
	var m Match
	for round := range 200 {
		specs := make([]Spec, 1+rng.IntN(10))
		for i := range specs {
			s := &specs[i]
			for range rng.IntN(3) {
				s.Hosts = append(s.Hosts, patterns[rng.IntN(len(patterns))])
			}
			switch rng.IntN(3) {
			case 1:
				s.PathPrefix = paths[rng.IntN(len(paths))]
			case 2:
				s.Path = paths[rng.IntN(len(paths))]
			}
			if rng.IntN(3) == 0 {
				s.Methods = []string{methods[rng.IntN(len(methods))]}
			}
			if rng.IntN(4) == 0 {
				s.Scheme = "https"
			}
		}
		shadowed := Shadows(specs)
		tab := mustNew(t, specs, Reject)
		for range 40 {
			req := request(methods[rng.IntN(len(methods))], paths[rng.IntN(len(paths))]+[]string{"", "x", "/x"}[rng.IntN(3)], hosts[rng.IntN(len(hosts))])
			m.Secure = rng.IntN(2) == 0
			if ok, err := tab.Match(req, &m); err != nil || !ok {
				continue
			}
			if by := shadowed[m.Route]; by >= 0 {
				t.Fatalf("round %d: %s %s on %s: Match chose route %d, which Shadows says route %d takes every request of\nspecs %+v", round, req.Method, req.Target, req.Host, m.Route, by, specs)
			}
		}
	}
}
