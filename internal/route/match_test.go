package route

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"relay/internal/h1"
)

// matchCase is one request and the route (by name, "" for none) and
// backend target it must get.
type matchCase struct {
	name    string
	method  string
	target  string
	host    string
	headers []string
	route   string
	backend string
}

func runMatch(t *testing.T, tab *Table, tests []matchCase) {
	t.Helper()
	var m Match // reused on purpose: state must not leak between requests
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = "GET"
			}
			ok, err := tab.Match(request(method, tt.target, tt.host, tt.headers...), &m)
			if err != nil {
				t.Fatalf("Match: %v", err)
			}
			got := ""
			if ok {
				got = tab.Spec(m.Route).Name
			} else if m.Route != -1 {
				t.Errorf("no match but Route %d", m.Route)
			}
			if got != tt.route {
				t.Errorf("route %q, want %q", got, tt.route)
			}
			want := tt.backend
			if want == "" {
				want = tt.target
			}
			if string(m.Target()) != want {
				t.Errorf("backend gets %q, want %q", m.Target(), want)
			}
			// Explain walks every route without the index: it must agree.
			hdrs := [][2]string{}
			for i := 0; i+1 < len(tt.headers); i += 2 {
				hdrs = append(hdrs, [2]string{tt.headers[i], tt.headers[i+1]})
			}
			e := tab.Explain(method, tt.target, tt.host, hdrs)
			if e.Name != tt.route || e.Target != want {
				t.Errorf("Explain: route %q target %q, want %q %q", e.Name, e.Target, tt.route, want)
			}
			for _, s := range e.Steps[:max(len(e.Steps)-1, 0)] {
				if s.Matched {
					t.Errorf("Explain: %s matched before the route Match chose", s.Name)
				}
			}
		})
	}
}

func TestMatchHosts(t *testing.T) {
	tab := mustNew(t, []Spec{
		{Name: "exact", Hosts: []string{"api.example.com"}},
		{Name: "wild", Hosts: []string{"*.example.com"}},
		{Name: "deeper-wild", Hosts: []string{"*.b.example.com"}},
		{Name: "upper-dot", Hosts: []string{"WWW.Example.ORG."}},
		{Name: "ipv6", Hosts: []string{"[::1]"}},
		{Name: "two", Hosts: []string{"one.test", "*.two.test"}},
	}, Reject)
	runMatch(t, tab, []matchCase{
		{name: "exact", target: "/", host: "api.example.com", route: "exact"},
		{name: "exact with port", target: "/", host: "api.example.com:8443", route: "exact"},
		{name: "exact upper case", target: "/", host: "API.Example.COM", route: "exact"},
		{name: "exact trailing dot", target: "/", host: "api.example.com.", route: "exact"},
		{name: "exact trailing dot and port", target: "/", host: "api.example.com.:80", route: "exact"},
		{name: "two trailing dots", target: "/", host: "api.example.com..", route: ""},
		{name: "wildcard one label", target: "/", host: "a.example.com", route: "wild"},
		{name: "wildcard two labels", target: "/", host: "a.b.example.com", route: "wild"},
		{name: "wildcard not the apex", target: "/", host: "example.com", route: ""},
		{name: "wildcard label boundary", target: "/", host: "badexample.com", route: ""},
		{name: "wildcard empty label", target: "/", host: ".example.com", route: ""},
		{name: "wildcard empty inner label", target: "/", host: "a..example.com", route: ""},
		{name: "deeper wildcard after shorter", target: "/", host: "x.b.example.com", route: "wild"},
		{name: "config host upper and dot", target: "/", host: "www.example.org", route: "upper-dot"},
		{name: "ipv6", target: "/", host: "[::1]:8080", route: "ipv6"},
		{name: "second host of a route", target: "/", host: "x.two.test", route: "two"},
		{name: "first host of a route", target: "/", host: "one.test", route: "two"},
		{name: "other host", target: "/", host: "other.test", route: ""},
		{name: "empty host", target: "/", host: "", route: ""},
		{name: "port only", target: "/", host: ":80", route: ""},
		{name: "bad port", target: "/", host: "api.example.com:x", route: ""},
		{name: "percent in host", target: "/", host: "api%2eexample.com", route: ""},
		{name: "slash in host", target: "/", host: "api.example.com/x", route: ""},
		{name: "space in host", target: "/", host: "api.example.com ", route: ""},
		{name: "userinfo in host", target: "/", host: "u@api.example.com", route: ""},
		{name: "unclosed ipv6", target: "/", host: "[::1", route: ""},
	})
}

func TestMatchHostlessOrder(t *testing.T) {
	// Hostless routes interleave with host routes by their order.
	tab := mustNew(t, []Spec{
		{Name: "health", Path: "/healthz"},
		{Name: "api", Hosts: []string{"api.test"}, PathPrefix: "/v1"},
		{Name: "static", PathPrefix: "/static"},
		{Name: "wild", Hosts: []string{"*.test"}},
		{Name: "api-rest", Hosts: []string{"api.test"}},
		{Name: "all"},
	}, Reject)
	runMatch(t, tab, []matchCase{
		{name: "hostless first", target: "/healthz", host: "api.test", route: "health"},
		{name: "exact", target: "/v1/x", host: "api.test", route: "api"},
		{name: "hostless before wildcard", target: "/static/a", host: "api.test", route: "static"},
		{name: "wildcard before later exact", target: "/other", host: "api.test", route: "wild"},
		{name: "wildcard", target: "/other", host: "www.test", route: "wild"},
		{name: "catch all", target: "/other", host: "elsewhere", route: "all"},
		{name: "catch all without host", target: "/other", host: "", route: "all"},
	})
}

func TestMatchPaths(t *testing.T) {
	tab := mustNew(t, []Spec{
		{Name: "exact", Path: "/exact"},
		{Name: "exact-slash", Path: "/dir/"},
		{Name: "api", PathPrefix: "/api"},
		{Name: "static", PathPrefix: "/static/"},
		{Name: "both", Path: "/both/x", PathPrefix: "/both"},
		{Name: "root", PathPrefix: "/"},
	}, Reject)
	runMatch(t, tab, []matchCase{
		{name: "exact", target: "/exact", route: "exact"},
		{name: "exact with query", target: "/exact?a=b", route: "exact"},
		{name: "exact not prefix", target: "/exact/x", route: "root"},
		{name: "exact normalised", target: "/x/../exact", route: "exact", backend: "/exact"},
		{name: "exact trailing slash", target: "/dir/", route: "exact-slash"},
		{name: "exact without its slash", target: "/dir", route: "root"},
		{name: "prefix itself", target: "/api", route: "api"},
		{name: "prefix slash", target: "/api/", route: "api"},
		{name: "prefix below", target: "/api/x/y", route: "api"},
		{name: "prefix not a segment", target: "/apix", route: "root"},
		{name: "slash prefix", target: "/static/a.css", route: "static"},
		{name: "slash prefix itself", target: "/static/", route: "static"},
		{name: "slash prefix without slash", target: "/static", route: "root"},
		{name: "path and prefix", target: "/both/x", route: "both"},
		{name: "path and prefix fails path", target: "/both/y", route: "root"},
		{name: "star only pathless", method: "OPTIONS", target: "*", route: ""},
	})
	star := mustNew(t, []Spec{{Name: "api", PathPrefix: "/"}, {Name: "any"}}, Reject)
	runMatch(t, star, []matchCase{
		{name: "star skips path routes", method: "OPTIONS", target: "*", route: "any"},
	})
}

func TestMatchMethodsHeadersQuery(t *testing.T) {
	tab := mustNew(t, []Spec{
		{Name: "post", Methods: []string{"POST", "PUT"}, PathPrefix: "/m"},
		{Name: "canary", Headers: []KV{{"X-Env", "canary"}}},
		{Name: "debug", Headers: []KV{{"x-debug", ""}}},
		{Name: "ws", Headers: []KV{{"Upgrade", "websocket"}}},
		{Name: "v2", Query: []KV{{"version", "2"}}},
		{Name: "spaced", Query: []KV{{"q", "a b/c"}}},
		{Name: "flag", Query: []KV{{"flag", ""}}},
		{Name: "both", Headers: []KV{{"X-A", "1"}}, Query: []KV{{"b", "2"}}},
	}, Reject)
	runMatch(t, tab, []matchCase{
		{name: "method", method: "POST", target: "/m", route: "post"},
		{name: "second method", method: "PUT", target: "/m/x", route: "post"},
		{name: "method case-sensitive", method: "post", target: "/m", route: ""},
		{name: "other method", method: "GET", target: "/m", route: ""},
		{name: "header", target: "/", headers: []string{"X-Env", "canary"}, route: "canary"},
		{name: "header name any case", target: "/", headers: []string{"x-ENV", "canary"}, route: "canary"},
		{name: "header value exact", target: "/", headers: []string{"X-Env", "Canary"}, route: ""},
		{name: "header second field", target: "/", headers: []string{"X-Env", "prod", "X-Env", "canary"}, route: "canary"},
		{name: "header present", target: "/", headers: []string{"X-Debug", ""}, route: "debug"},
		{name: "hop-by-hop header", target: "/", headers: []string{"Upgrade", "websocket"}, route: "ws"},
		{name: "query", target: "/?a=1&version=2", route: "v2"},
		{name: "query encoded value", target: "/?version=%32", route: "v2"},
		{name: "query encoded name", target: "/?vers%69on=2", route: "v2"},
		{name: "query value exact", target: "/?version=20", route: ""},
		{name: "query any of several", target: "/?version=1&version=2", route: "v2"},
		{name: "query plus and escapes", target: "/?q=a+b%2Fc", route: "spaced"},
		{name: "query present without value", target: "/?flag", route: "flag"},
		{name: "query present empty", target: "/?x&flag=", route: "flag"},
		{name: "query name is exact", target: "/?Flag", route: ""},
		{name: "query not in path", target: "/flag", route: ""},
		{name: "all conditions", target: "/?b=2", headers: []string{"x-a", "1"}, route: "both"},
		{name: "one condition fails", target: "/?b=3", headers: []string{"x-a", "1"}, route: ""},
	})
}

func TestMatchRewrite(t *testing.T) {
	tab := mustNew(t, []Spec{
		{Name: "strip", PathPrefix: "/api", StripPrefix: true},
		{Name: "strip-slash", PathPrefix: "/s/", StripPrefix: true},
		{Name: "replace", PathPrefix: "/old", Replace: true, ReplacePrefix: "/new"},
		{Name: "replace-slash", PathPrefix: "/r", Replace: true, ReplacePrefix: "/v2/"},
		{Name: "replace-both-slash", PathPrefix: "/rs/", Replace: true, ReplacePrefix: "/v3"},
		{Name: "replace-empty", PathPrefix: "/e", Replace: true, ReplacePrefix: ""},
		{Name: "root-strip", PathPrefix: "/", StripPrefix: true},
	}, Reject)
	runMatch(t, tab, []matchCase{
		{name: "strip below", target: "/api/users?id=1", route: "strip", backend: "/users?id=1"},
		{name: "strip itself", target: "/api", route: "strip", backend: "/"},
		{name: "strip itself with slash", target: "/api/", route: "strip", backend: "/"},
		{name: "strip with query", target: "/api?x", route: "strip", backend: "/?x"},
		{name: "strip normalised first", target: "/x/../api//a/./b", route: "strip", backend: "/a/b"},
		{name: "strip slash prefix", target: "/s/a", route: "strip-slash", backend: "/a"},
		{name: "strip slash prefix itself", target: "/s/", route: "strip-slash", backend: "/"},
		{name: "replace", target: "/old/a", route: "replace", backend: "/new/a"},
		{name: "replace itself", target: "/old", route: "replace", backend: "/new"},
		{name: "replace trailing slash", target: "/old/", route: "replace", backend: "/new/"},
		{name: "replace ending in slash", target: "/r/a", route: "replace-slash", backend: "/v2/a"},
		{name: "replace ending in slash itself", target: "/r", route: "replace-slash", backend: "/v2/"},
		{name: "replace prefix ending in slash", target: "/rs/a", route: "replace-both-slash", backend: "/v3/a"},
		{name: "replace prefix ending in slash itself", target: "/rs/", route: "replace-both-slash", backend: "/v3/"},
		{name: "replace with empty", target: "/e/x", route: "replace-empty", backend: "/x"},
		{name: "strip root", target: "/a/b", route: "root-strip", backend: "/a/b"},
		{name: "strip root itself", target: "/", route: "root-strip", backend: "/"},
	})
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		mode EscapedSlashes
		want string
	}{
		{"star inside host", Spec{Hosts: []string{"a.*.com"}}, Reject, `match.host[0]: "a.*.com": "*" may only stand as the whole first label`},
		{"bare star", Spec{Hosts: []string{"*"}}, Reject, `"*": "*" may only stand as the whole first label`},
		{"host with port", Spec{Hosts: []string{"a.com:80"}}, Reject, `"a.com:80" holds a port`},
		{"empty label", Spec{Hosts: []string{"a..com"}}, Reject, `"a..com" has an empty label`},
		{"wildcard ipv6", Spec{Hosts: []string{"*.[::1]"}}, Reject, `"*.[::1]": a wildcard stands for the first labels of a domain, not for part of an IPv6 address`},
		{"path not absolute", Spec{Path: "x"}, Reject, `match.path: must start with "/", got "x"`},
		{"path with query", Spec{Path: "/x?a"}, Reject, `"/x?a" holds a query`},
		{"prefix not normal", Spec{PathPrefix: "/a/../b"}, Reject, `match.path_prefix: "/a/../b" holds a dot segment ("..")`},
		{"prefix double slash", Spec{PathPrefix: "//a"}, Reject, `"//a" holds repeated slashes`},
		{"prefix lower escape", Spec{PathPrefix: "/a%2f"}, Keep, `match.path_prefix: "/a%2f" is not in normal form: write "/a%2F"`},
		{"prefix encoded slash rejected", Spec{PathPrefix: "/a%2F"}, Reject, `match.path_prefix: "/a%2F" holds an escaped slash (%2F or %5C), which a request path has when it is matched only with escaped_slashes: keep (it is reject)`},
		{"bad method", Spec{Methods: []string{"GE T"}}, Reject, `match.methods[0]: "GE T" is not a method name`},
		{"bad header name", Spec{Headers: []KV{{"X:A", ""}}}, Reject, `match.headers.X:A: "X:A" is not a header name`},
		{"header value newline", Spec{Headers: []KV{{"X", "a\nb"}}}, Reject, `control character`},
		{"empty query name", Spec{Query: []KV{{"", "a"}}}, Reject, `a query parameter's name must not be empty`},
		{"strip and replace", Spec{PathPrefix: "/a", StripPrefix: true, Replace: true}, Reject, `replace_prefix: strip_prefix and replace_prefix both rewrite match.path_prefix; keep one`},
		{"strip without prefix", Spec{StripPrefix: true}, Reject, `strip_prefix: strip_prefix rewrites the part of the path match.path_prefix matched, and this route has none`},
		{"replace not a path", Spec{PathPrefix: "/a", Replace: true, ReplacePrefix: "v2"}, Reject, `replace_prefix: must start with "/", got "v2"`},
		{"set header bad value", Spec{RequestHeaders: HeaderOps{Set: []KV{{"X", "a\r\nb: c"}}}}, Reject, `control character`},
		{"set a hop-by-hop field", Spec{RequestHeaders: HeaderOps{Set: []KV{{"Connection", "close"}}}}, Reject, `request_headers.set.Connection: Connection is a hop-by-hop field`},
		{"header value padded", Spec{Headers: []KV{{"X", " a"}}}, Reject, `match.headers.X: " a" starts or ends with white space`},
		{"host header condition", Spec{Headers: []KV{{"Host", "a"}}}, Reject, `match.headers.Host: the host is matched with match.host`},
		{"remove bad name", Spec{ResponseHeaders: HeaderOps{Remove: []string{"a b"}}}, Reject, `response_headers.remove[0]: "a b" is not a header name`},
		{"redirect status", Spec{Redirect: &Redirect{Status: 200}}, Reject, `redirect.status: 200 is not a redirect status`},
		{"redirect scheme", Spec{Redirect: &Redirect{Status: 301, Scheme: "ftp"}}, Reject, `redirect.scheme: must be "http" or "https", got "ftp"`},
		{"redirect wildcard", Spec{Redirect: &Redirect{Status: 301, Host: "*.a.com"}}, Reject, `redirect.host: "*.a.com": a redirect goes to one host, not a pattern`},
		{"redirect port", Spec{Redirect: &Redirect{Status: 301, Port: 70000}}, Reject, `redirect.port: must be between 1 and 65535, got 70000`},
		{"redirect path", Spec{Redirect: &Redirect{Status: 301, Path: "/a//b"}}, Reject, `redirect.path: "/a//b" holds repeated slashes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.spec.Name = "r"
			_, err := New([]Spec{tt.spec}, tt.mode)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), `route "r": `) {
				t.Fatalf("New: %v, want an error about the route with %q", err, tt.want)
			}
		})
	}
	if _, err := New([]Spec{{Name: "a"}, {Name: "a"}}, Reject); err == nil || !strings.Contains(err.Error(), `route "a": the name is used by routes[0] too`) {
		t.Errorf("duplicate names: %v", err)
	}
	if _, err := New([]Spec{{}, {Name: "routes[0]"}}, Reject); err == nil {
		t.Errorf("a name equal to a default name was accepted")
	}
	if _, err := New(nil, EscapedSlashes(7)); err == nil || !strings.Contains(err.Error(), "mode 7") {
		t.Errorf("bad mode: %v", err)
	}
}

// TestMatchIndexAgreesWithScan routes random requests through random
// tables and checks the indexed Match against a plain scan of every route
// (Explain's walk), so the candidate lists never skip or reorder a route.
func TestMatchIndexAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	hosts := []string{"a.test", "b.a.test", "c.b.a.test", "x.test", "A.TEST", "test", "[::1]"}
	patterns := []string{"a.test", "*.a.test", "*.b.a.test", "*.test", "x.test", "test", "[::1]"}
	paths := []string{"/", "/a", "/a/b", "/b", "/a/"}
	var m Match
	for round := 0; round < 200; round++ {
		var specs []Spec
		for i := rng.Intn(12); i >= 0; i-- {
			var s Spec
			for j := rng.Intn(3); j > 0; j-- {
				s.Hosts = append(s.Hosts, patterns[rng.Intn(len(patterns))])
			}
			if rng.Intn(2) == 0 {
				s.PathPrefix = paths[rng.Intn(len(paths))]
			}
			specs = append(specs, s)
		}
		tab := mustNew(t, specs, Reject)
		for k := 0; k < 20; k++ {
			host := hosts[rng.Intn(len(hosts))] + []string{"", ":80", "."}[rng.Intn(3)]
			target := paths[rng.Intn(len(paths))] + "x"
			if _, err := tab.Match(request("GET", target, host), &m); err != nil {
				t.Fatal(err)
			}
			e := tab.Explain("GET", target, host, nil)
			last := -1
			for _, s := range e.Steps {
				if s.Matched {
					last = s.Route
					break
				}
			}
			if m.Route != last || e.Route != m.Route {
				t.Fatalf("round %d: %s %s: Match chose %d, a scan %d\nspecs %s\n%s", round, host, target, m.Route, last, fmt.Sprint(specs), e)
			}
		}
	}
}

func TestMatchEmptyTable(t *testing.T) {
	tab := mustNew(t, nil, Decode)
	var m Match
	ok, err := tab.Match(request("GET", "/a/%2e%2e//b%2Fc?x=%2e", "h"), &m)
	if ok || err != nil || m.Route != -1 || string(m.Target()) != "/b/c?x=%2e" || string(m.Path()) != "/b/c" {
		t.Errorf("Match = %v %v, route %d, target %q path %q", ok, err, m.Route, m.Target(), m.Path())
	}
	ok, err = tab.Match(request("GET", "/%zz", "h"), &m)
	if ok || err != ErrEscape || len(m.Target()) != 0 {
		t.Errorf("bad escape: %v %v %q", ok, err, m.Target())
	}
}

// A route with a scheme takes only requests that came over that kind of
// listener, so an http-to-https redirect does not catch TLS requests.
func TestMatchScheme(t *testing.T) {
	tb, err := New([]Spec{
		{Name: "to-https", Scheme: "http", Redirect: &Redirect{Status: 301, Scheme: "https"}},
		{Name: "app", PathPrefix: "/"},
	}, Reject)
	if err != nil {
		t.Fatal(err)
	}
	req := &h1.Request{Method: []byte("GET"), Target: []byte("/a"), Host: []byte("example.com")}
	for _, tt := range []struct {
		secure bool
		want   int
	}{{false, 0}, {true, 1}} {
		m := Match{Secure: tt.secure}
		if ok, err := tb.Match(req, &m); !ok || err != nil || m.Route != tt.want {
			t.Errorf("secure %v: route %d (%v, %v), want %d", tt.secure, m.Route, ok, err, tt.want)
		}
	}
	if _, err := New([]Spec{{Scheme: "ftp"}}, Reject); err == nil {
		t.Error("scheme ftp accepted")
	}
}
