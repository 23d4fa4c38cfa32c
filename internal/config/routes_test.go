package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"relay/internal/route"
)

// twoPools are pools for routes to name, from line 1 to 5.
var twoPools = []string{
	"pools:",
	"  api:",
	"    backends: [http://127.0.0.1:8001]",
	"  web:",
	"    backends: [http://127.0.0.1:8002]",
}

// withPools is a file of twoPools followed by lines, which start on line 6.
func withPools(lines ...string) string {
	return y(append(append([]string(nil), twoPools...), lines...)...)
}

// kvs makes header fields or query parameters of name, value pairs.
func kvs(pairs ...string) []route.KV {
	var out []route.KV
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, route.KV{Name: pairs[i], Value: pairs[i+1]})
	}
	return out
}

// TestRoutesParse: every key of a route lands in Route, in the normal
// form routing compares: hosts lower case, paths with unreserved escapes
// decoded and the others upper case, headers and query in file order.
func TestRoutesParse(t *testing.T) {
	c := mustParse(t, withPools(
		"escaped_slashes: keep",
		"routes:",
		"  - name: api",
		"    match:",
		"      host: [API.Example.com, \"*.example.org\", \"[2001:DB8::1]\"]",
		"      path_prefix: /api/%7euser/%2f",
		"      methods: [GET, POST, PURGE]",
		"      headers: {X-Env: canary, X-Debug: \"\", X-Empty: }",
		"      query: {version: 2, debug: \"\"}",
		"      scheme: https",
		"    pool: api",
		"    replace_prefix: /v2",
		"    request_headers:",
		"      set: {X-A: b}",
		"      add: {X-B: c}",
		"      remove: [X-C, X-D]",
		"    response_headers: {set: {Cache-Control: no-store}, remove: Server}",
		"  - match: {path: /old, scheme: http}",
		"    redirect: {status: 308, scheme: https, host: WWW.example.com, port: 8443, path: /new}",
		"  - match: {host: static.example.com, path_prefix: /static/}",
		"    pool: web",
		"    strip_prefix: true",
		"  - match: {scheme: http}",
		"    redirect: {scheme: https}",
		"  - pool: default",
		"backends: [http://127.0.0.1:8003]",
	))
	want := []Route{
		{
			Spec: route.Spec{
				Name:       "api",
				Hosts:      []string{"api.example.com", "*.example.org", "[2001:db8::1]"},
				PathPrefix: "/api/~user/%2F",
				Methods:    []string{"GET", "POST", "PURGE"},
				Headers:    kvs("X-Env", "canary", "X-Debug", "", "X-Empty", ""),
				Query:      kvs("version", "2", "debug", ""),
				Scheme:     "https",
				Replace:    true, ReplacePrefix: "/v2",
				RequestHeaders: route.HeaderOps{
					Set: kvs("X-A", "b"), Add: kvs("X-B", "c"), Remove: []string{"X-C", "X-D"},
				},
				ResponseHeaders: route.HeaderOps{Set: kvs("Cache-Control", "no-store"), Remove: []string{"Server"}},
			},
			Pool: "api",
			Line: 8,
		},
		{
			Spec: route.Spec{
				Name: "routes[1]", Path: "/old", Scheme: "http",
				Redirect: &route.Redirect{Status: 308, Scheme: "https", Host: "www.example.com", Port: 8443, Path: "/new"},
			},
			Line: 23,
		},
		{
			Spec: route.Spec{Name: "routes[2]", Hosts: []string{"static.example.com"}, PathPrefix: "/static/", StripPrefix: true},
			Pool: "web",
			Line: 25,
		},
		{
			Spec: route.Spec{Name: "routes[3]", Scheme: "http", Redirect: &route.Redirect{Status: DefaultRedirectStatus, Scheme: "https"}},
			Line: 28,
		},
		{Spec: route.Spec{Name: "routes[4]"}, Pool: DefaultPool, Line: 30},
	}
	if len(c.Routes) != len(want) {
		t.Fatalf("%d routes, want %d", len(c.Routes), len(want))
	}
	for i := range want {
		got := c.Routes[i]
		got.named, got.lines = false, nil
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("route %d:\n got  %+v\n want %+v", i, got, want[i])
		}
	}
	if c.EscapedSlashes != "keep" {
		t.Errorf("escaped_slashes = %q", c.EscapedSlashes)
	}
	if d := mustParse(t, y("backends: [http://127.0.0.1:8001]")); d.EscapedSlashes != "reject" || d.Routes != nil {
		t.Errorf("defaults: escaped_slashes %q, routes %v; want reject and none", d.EscapedSlashes, d.Routes)
	}
}

// TestRouteProblems: each mistake in a route is reported on its line,
// with the key that holds it and what would be right.
func TestRouteProblems(t *testing.T) {
	tests := []struct {
		name  string
		lines []string // from line 6
		want  []string
	}{
		{"unknown pool", []string{"routes:", "  - pool: api2"},
			[]string{`test.yml:7: routes[0].pool: unknown pool "api2"; did you mean "api"? pools: api, web`}},
		{"default without backends", []string{"routes:", "  - pool: default"},
			[]string{`test.yml:7: routes[0].pool: pool "default" is the top level's backends, and the top level lists none`}},
		{"duplicate names", []string{"routes:", "  - name: a", "    pool: api", "  - name: a", "    pool: web"},
			[]string{`test.yml:9: routes[1].name: route name "a" is taken by the route at line 7`}},
		{"bad name", []string{"routes:", "  - name: My Route", "    pool: api"},
			[]string{`test.yml:7: routes[0].name: route names are 1 to 64 of a-z`}},
		{"pool and redirect", []string{"routes:", "  - pool: api", "    match: {scheme: http}", "    redirect: {scheme: https}"},
			[]string{"test.yml:9: routes[0].redirect: a route forwards to a pool or answers with a redirect, not both; remove pool (line 7) or redirect"}},
		{"neither", []string{"routes:", "  - match: {path: /x}"},
			[]string{`test.yml:7: routes[0]: needs pool (where its requests go; "default" for the top level's backends) or redirect`}},
		{"strip and replace", []string{"routes:", "  - match: {path_prefix: /a}", "    pool: api", "    strip_prefix: true", "    replace_prefix: /b"},
			[]string{"test.yml:10: routes[0].replace_prefix: strip_prefix (line 9) and replace_prefix both rewrite match.path_prefix; keep one"}},
		{"strip without prefix", []string{"routes:", "  - match: {host: a.example}", "    pool: api", "    strip_prefix: true"},
			[]string{"test.yml:9: routes[0].strip_prefix: strip_prefix rewrites the part of the path match.path_prefix matched, and this route has none"}},
		{"replace with exact path", []string{"routes:", "  - match: {path: /a}", "    pool: api", "    replace_prefix: /b"},
			[]string{"test.yml:9: routes[0].replace_prefix: replace_prefix rewrites the part of the path match.path_prefix matched, and this route matches an exact path"}},
		{"empty replace", []string{"routes:", "  - match: {path_prefix: /a}", "    pool: api", `    replace_prefix: ""`},
			[]string{"test.yml:9: routes[0].replace_prefix: is empty; to remove match.path_prefix from the path, set strip_prefix: true"}},
		{"path and prefix", []string{"routes:", "  - match:", "      path_prefix: /a", "      path: /a/b", "    pool: api"},
			[]string{"test.yml:9: routes[0].match.path: match.path and match.path_prefix (line 8) together"}},
		{"prefix without slash", []string{"routes:", "  - match: {path_prefix: api}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.path_prefix: must start with "/", got "api"`}},
		{"path without slash", []string{"routes:", "  - match: {path: x}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.path: must start with "/", got "x"`}},
		{"dot segment", []string{"routes:", "  - match: {path_prefix: /a/%2e%2E/b}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.path_prefix: "/a/%2e%2E/b" holds a dot segment ("..")`}},
		{"double slash", []string{"routes:", "  - match: {path_prefix: //a}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.path_prefix: "//a" holds repeated slashes`}},
		{"query in path", []string{"routes:", "  - match:", "      path: /a?b=1", "    pool: api"},
			[]string{`test.yml:8: routes[0].match.path: "/a?b=1" holds a query`}},
		{"space in path", []string{"routes:", "  - match: {path: /a b}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.path: "/a b" holds a space, which a request path carries percent-encoded: write "/a%20b"`}},
		{"escaped slash kept out", []string{"routes:", "  - match: {path_prefix: /a%2fb}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.path_prefix: "/a%2Fb" holds an escaped slash (%2F or %5C), which a request path has when it is matched only with escaped_slashes: keep (it is reject)`}},
		{"escaped slash written by a rewrite", []string{"routes:", "  - match: {path_prefix: /a}", "    pool: api", "    replace_prefix: /b%2fc"},
			[]string{`test.yml:9: routes[0].replace_prefix: "/b%2Fc" holds an escaped slash (%2F or %5C), which relay gives a backend or a client only with escaped_slashes: keep (it is reject)`}},
		{"escaped slash written by a redirect", []string{"routes:", "  - match: {path: /a}", "    redirect:", "      status: 301", "      path: /b%5Cc"},
			[]string{`test.yml:10: routes[0].redirect.path: "/b%5Cc" holds an escaped slash (%2F or %5C), which relay gives a backend or a client only with escaped_slashes: keep (it is reject)`}},
		{"redirect status", []string{"routes:", "  - match: {path: /a}", "    redirect: {status: 200, path: /b}"},
			[]string{"test.yml:8: routes[0].redirect.status: 200 is not a redirect status; use 301 or 308 (permanent), 302, 303 or 307"}},
		{"redirect scheme", []string{"routes:", "  - match: {path: /a}", "    redirect: {scheme: HTTPS, path: /b}"},
			[]string{`test.yml:8: routes[0].redirect.scheme: must be "http" or "https", got "HTTPS"; did you mean "https"?`}},
		{"redirect to itself", []string{"routes:", "  - match: {path: /a}", "    redirect: {status: 301}"},
			[]string{"test.yml:8: routes[0].redirect: changes nothing in the URL"}},
		{"redirect to https without scheme", []string{"routes:", "  - redirect: {scheme: https}"},
			[]string{"test.yml:7: routes[0].redirect.scheme: a redirect to https needs match.scheme: http"}},
		{"redirect host with port", []string{"routes:", "  - match: {path: /a}", "    redirect: {host: \"a.example:80\"}"},
			[]string{`test.yml:8: routes[0].redirect.host: "a.example:80" holds a port or is not an address; give the port as redirect.port`}},
		{"redirect port", []string{"routes:", "  - match: {path: /a}", "    redirect: {port: 0, path: /b}"},
			[]string{"test.yml:8: routes[0].redirect.port: must be between 1 and 65535, got 0"}},
		{"request headers on a redirect", []string{"routes:", "  - match: {path: /a}", "    redirect: {path: /b}", "    request_headers: {set: {X-A: b}}"},
			[]string{"test.yml:9: routes[0].request_headers: a redirect forwards no request"}},
		{"redirect path and strip", []string{"routes:", "  - match: {path_prefix: /a}", "    strip_prefix: true", "    redirect: {path: /b}"},
			[]string{"test.yml:9: routes[0].redirect.path: redirect.path replaces the whole path, so strip_prefix (line 8) would change nothing"}},
		{"host with port", []string{"routes:", "  - match: {host: \"a.example.com:8080\"}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.host[0]: "a.example.com:8080" holds a port; a host rule matches the host whatever the port, so write "a.example.com"`}},
		{"star inside", []string{"routes:", "  - match:", "      host:", "        - ok.example.com", "        - \"a.*.example.com\"", "    pool: api"},
			[]string{`test.yml:10: routes[0].match.host[1]: "a.*.example.com": "*" may only stand as the whole first label`}},
		{"star glued", []string{"routes:", "  - match: {host: \"*example.com\"}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.host[0]: "*example.com": "*" may only stand as the whole first label`}},
		{"empty label", []string{"routes:", "  - match: {host: a..example.com}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.host[0]: "a..example.com" has an empty label`}},
		{"bare ipv6", []string{"routes:", "  - match: {host: \"::1\"}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.host[0]: "::1": an IPv6 address is written in brackets`}},
		{"wildcard tld", []string{"routes:", "  - match: {host: \"*.com\"}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.host[0]: "*.com": a wildcard needs a domain of at least two labels`}},
		{"host twice", []string{"routes:", "  - match: {host: [a.example, A.example]}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.host[1]: "a.example" is listed twice`}},
		{"bad method", []string{"routes:", "  - match: {methods: [GET, \"PO ST\"]}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.methods[1]: "PO ST" is not a method name`}},
		{"empty methods", []string{"routes:", "  - match: {methods: []}", "    pool: api"},
			[]string{"test.yml:7: routes[0].match.methods: is empty; leave methods out to match every method"}},
		{"bad header name", []string{"routes:", "  - match: {headers: {\"X Env\": a}}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.headers.X Env: "X Env" is not a header name`}},
		{"host header", []string{"routes:", "  - match: {headers: {host: a}}", "    pool: api"},
			[]string{"test.yml:7: routes[0].match.headers.host: the host is matched with match.host"}},
		{"header twice", []string{"routes:", "  - match:", "      headers:", "        X-A: a", "        x-a: b", "    pool: api"},
			[]string{"test.yml:10: routes[0].match.headers.x-a: set twice (first at line 9)"}},
		{"empty query name", []string{"routes:", "  - match: {query: {\"\": a}}", "    pool: api"},
			[]string{"test.yml:7: routes[0].match.query.: a query parameter's name must not be empty"}},
		{"match scheme", []string{"routes:", "  - match: {scheme: ftp}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.scheme: must be "http" or "https"`}},
		{"match key without value", []string{"routes:", "  - match:", "      path_prefix:", "    pool: api"},
			[]string{"test.yml:8: routes[0].match.path_prefix: has no value; leave it out to match every request"}},
		{"unknown match key", []string{"routes:", "  - match: {paht: /a}", "    pool: api"},
			[]string{`test.yml:7: routes[0].match.paht: unknown key; did you mean "path"?`}},
		{"set Connection", []string{"routes:", "  - pool: api", "    request_headers: {set: {Connection: close}}"},
			[]string{"test.yml:8: routes[0].request_headers.set.Connection: Connection is a hop-by-hop field"}},
		{"remove Content-Length", []string{"routes:", "  - pool: api", "    response_headers: {remove: [content-length]}"},
			[]string{"test.yml:8: routes[0].response_headers.remove[0]: content-length frames the message"}},
		{"add Transfer-Encoding", []string{"routes:", "  - pool: api", "    response_headers: {add: {Transfer-Encoding: gzip}}"},
			[]string{"test.yml:8: routes[0].response_headers.add.Transfer-Encoding: Transfer-Encoding frames the message"}},
		{"set Host", []string{"routes:", "  - pool: api", "    request_headers: {set: {Host: a}}"},
			[]string{"test.yml:8: routes[0].request_headers.set.Host: Host names the site the client asked for"}},
		{"set and remove", []string{"routes:", "  - pool: api", "    request_headers:", "      set: {X-A: b}", "      remove: [x-a]"},
			[]string{`test.yml:10: routes[0].request_headers.remove[0]: "x-a" is also in set (line 9); each field gets one action`}},
		{"header value with a line break", []string{"routes:", "  - pool: api", "    request_headers: {set: {X-A: \"b\\r\\nX-B: c\"}}"},
			[]string{`test.yml:8: routes[0].request_headers.set.X-A: "b\r\nX-B: c" holds a control character`}},
		{"escaped_slashes", []string{"escaped_slashes: decoded"},
			[]string{`test.yml:6: escaped_slashes: must be one of reject, decode, keep; got "decoded"; did you mean "decode"?`}},
		{"routes not a list", []string{"routes: {pool: api}"},
			[]string{"test.yml:6: routes: must be a list of routes"}},
		{"route not a mapping", []string{"routes:", "  - api"},
			[]string{`test.yml:7: routes[0]: must be a mapping with match and pool (or redirect), got "api"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(withPools(tt.lines...)), "test.yml", testOpts)
			ps := problems(t, err)
			if len(ps) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(ps[i].String(), w) {
					t.Errorf("problem %d:\n got  %s\n want %s...", i, ps[i], w)
				}
			}
		})
	}
}

// TestRouteWarnings: a route an earlier one takes every request of, a
// named pool no route reaches, and a method in lower case are warnings,
// named with both sides' lines; narrower earlier routes are none.
func TestRouteWarnings(t *testing.T) {
	tests := []struct {
		name  string
		lines []string // from line 6
		want  []string // "" entries: none
	}{
		{"no conditions first", []string{"routes:", "  - pool: api", "  - match: {path_prefix: /web}", "    pool: web"},
			[]string{"test.yml:8: warning: routes[1]: route routes[1] can never match: route routes[0] (line 7) comes first and takes every request it would (it has no match conditions)",
				"test.yml:4: warning: pools.web: no request reaches pool web: the routes naming it (routes[1]) can never match"}},
		{"wider prefix first", []string{"routes:", "  - name: all-api", "    match: {host: a.example, path_prefix: /api}", "    pool: api",
			"  - name: users", "    match: {host: a.example, path_prefix: /api/users, methods: [GET]}", "    pool: web"},
			[]string{`test.yml:10: warning: routes[1]: route "users" can never match: route "all-api" (line 7) comes first and takes every request it would;`,
				`test.yml:4: warning: pools.web: no request reaches pool web: the routes naming it ("users") can never match`}},
		{"wildcard covers a name", []string{"routes:", "  - match: {host: \"*.example.com\"}", "    pool: api",
			"  - match: {host: [a.example.com, \"*.b.example.com\"], path: /x}", "    pool: web"},
			[]string{"test.yml:9: warning: routes[1]: route routes[1] can never match: route routes[0] (line 7)", "test.yml:4: warning: pools.web: no request reaches pool web: the routes naming it"}},
		{"header present covers a value", []string{"routes:", "  - match: {headers: {x-env: \"\"}}", "    pool: api",
			"  - match: {headers: {X-Env: canary, X-B: c}, query: {a: b}}", "    pool: web"},
			[]string{"test.yml:9: warning: routes[1]: route routes[1] can never match", "test.yml:4: warning: pools.web: no request reaches pool web: the routes naming it"}},
		{"unreached pool", []string{"routes:", "  - pool: api"},
			[]string{"test.yml:4: warning: pools.web: no route sends requests to pool web; add a route with pool: web, or remove the pool"}},
		{"pool named only by a shadowed route", []string{"routes:", "  - match: {path_prefix: /}", "    pool: api", "  - match: {path_prefix: /w}", "    pool: web"},
			[]string{"test.yml:9: warning: routes[1]: route routes[1] can never match: route routes[0] (line 7)",
				"test.yml:4: warning: pools.web: no request reaches pool web: the routes naming it (routes[1]) can never match"}},
		{"lower-case method", []string{"routes:", "  - match: {methods: [get]}", "    pool: api", "  - pool: web"},
			[]string{`test.yml:7: warning: routes[0].match.methods[0]: methods are case-sensitive: "get" matches only requests whose method is "get", never "GET"`}},
		// None of these takes every request of the route after it.
		{"narrower first", []string{"routes:", "  - match: {path_prefix: /api/users}", "    pool: web", "  - match: {path_prefix: /api}", "    pool: api"}, nil},
		{"not segment-wise", []string{"routes:", "  - match: {path_prefix: /api}", "    pool: web", "  - match: {path_prefix: /apix}", "    pool: api"}, nil},
		{"methods narrow", []string{"routes:", "  - match: {path_prefix: /api, methods: [GET]}", "    pool: web", "  - match: {path_prefix: /api/x}", "    pool: api"}, nil},
		{"other host", []string{"routes:", "  - match: {host: a.example}", "    pool: web", "  - match: {host: b.example}", "    pool: api"}, nil},
		{"wildcard not the apex", []string{"routes:", "  - match: {host: \"*.example.com\"}", "    pool: web", "  - match: {host: example.com}", "    pool: api"}, nil},
		{"header value narrow", []string{"routes:", "  - match: {headers: {X-Env: canary}}", "    pool: web", "  - match: {headers: {X-Env: \"\"}}", "    pool: api"}, nil},
		{"query narrow", []string{"routes:", "  - match: {query: {v: \"2\"}}", "    pool: web", "  - match: {query: {V: \"2\"}}", "    pool: api"}, nil},
		{"scheme", []string{"routes:", "  - match: {scheme: http}", "    redirect: {scheme: https}", "  - pool: api", "  - pool: web"},
			[]string{"test.yml:10: warning: routes[2]: route routes[2] can never match: route routes[1] (line 9)",
				"test.yml:4: warning: pools.web: no request reaches pool web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, withPools(tt.lines...))
			ws := c.Warnings(testOpts)
			if len(ws) != len(tt.want) {
				t.Fatalf("got %d warnings, want %d: %v", len(ws), len(tt.want), ws)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(ws[i].Warning(), w) {
					t.Errorf("warning %d:\n got  %s\n want %s...", i, ws[i].Warning(), w)
				}
			}
		})
	}
}

// TestChangedRoutes: changed routes are the key routes, applied by
// reload; routes moved to other lines are unchanged.
func TestChangedRoutes(t *testing.T) {
	a := mustParse(t, withPools("routes:", "  - match: {path_prefix: /a}", "    pool: api", "  - pool: web"))
	moved := mustParse(t, y(append([]string{"# moved"}, strings.Split(strings.TrimSpace(withPools("routes:", "  - match: {path_prefix: /a}", "    pool: api", "  - pool: web")), "\n")...)...))
	if got := Changed(a, moved); len(got) != 0 {
		t.Errorf("Changed after a move = %v, want none", got)
	}
	b := mustParse(t, withPools("escaped_slashes: decode", "routes:", "  - match: {path_prefix: /b}", "    pool: api", "  - pool: web"))
	if got, want := Changed(a, b), []string{"routes", "escaped_slashes"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Changed = %v, want %v", got, want)
	}
	if got := RestartOnly(a, b); len(got) != 0 {
		t.Errorf("RestartOnly = %v, want none: routes and escaped_slashes apply live", got)
	}
}

// TestRoutesExample: examples/routes.yml loads with its three pools and
// every route, and draws no warning.
func TestRoutesExample(t *testing.T) {
	data, err := os.ReadFile("../../examples/routes.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := etcRelayFiles(t, string(data))
	c, err := Parse([]byte(strings.ReplaceAll(string(data), "/etc/relay/", dir+"/")), "routes.yml", testOpts)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.PoolNames, []string{"web", "api", "static"}; !reflect.DeepEqual(got, want) {
		t.Errorf("pools %v, want %v", got, want)
	}
	if len(c.Routes) < 6 {
		t.Errorf("%d routes", len(c.Routes))
	}
	if ws := c.Warnings(testOpts); len(ws) != 0 {
		t.Errorf("warnings: %v", ws)
	}
}
