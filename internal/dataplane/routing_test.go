package dataplane

import (
	"net/http"
	"strings"
	"testing"
)

// routingYAML has a route for every kind of condition and action, in an
// order that lets the tests show the first match winning. "$name" stands
// for the echo backend of that name.
const routingYAML = `
backends: [$default]
pools:
  api: {backends: [$api]}
  wild: {backends: [$wild]}
  canary: {backends: [$canary]}
  debug: {backends: [$debug]}
  query: {backends: [$query]}
  flag: {backends: [$flag]}
  strip: {backends: [$strip]}
  replace: {backends: [$replace]}
  exact: {backends: [$exact]}
  writes: {backends: [$writes]}
routes:
  - name: old
    match: {path: /old}
    redirect: {status: 301, scheme: https, host: new.example.com, port: 8443, path: /new}
  - name: moved
    match: {path_prefix: /moved, scheme: http}
    redirect: {status: 308, scheme: https}
  - name: api
    match: {host: api.example.com}
    pool: api
    request_headers:
      set: {X-Req-Set: relay}
      add: {X-Req-Add: one}
      remove: [X-Req-Drop]
    response_headers:
      set: {X-Resp-Set: relay}
      add: {X-Resp-Add: one}
      remove: [X-Resp-Drop]
  - name: wild
    match: {host: "*.apps.example.com"}
    pool: wild
  - name: canary
    match: {headers: {X-Env: canary}}
    pool: canary
  - name: debug
    match: {headers: {X-Debug: ""}}
    pool: debug
  - name: query
    match: {query: {version: "2"}}
    pool: query
  - name: flag
    match: {query: {flag: ""}}
    pool: flag
  - name: strip
    match: {path_prefix: /svc}
    pool: strip
    strip_prefix: true
  - name: replace
    match: {path_prefix: /v1}
    pool: replace
    replace_prefix: /v2
  - name: exact
    match: {path: /exact}
    pool: exact
  - name: writes
    match: {path_prefix: /w, methods: [POST, PUT]}
    pool: writes
`

var routingPools = []string{"default", "api", "wild", "canary", "debug", "query", "flag", "strip", "replace", "exact", "writes"}

// routeCase is one request and what must come of it: the pool whose
// backend answers ("" when relay answers itself) with the target it got,
// or relay's status and Location. reqHeaders are fields the backend must
// have got, respHeaders fields the client must get (value "" means
// absent; several values joined by ",").
type routeCase struct {
	name        string
	rq          rawReq
	status      int
	pool        string
	target      string
	location    string
	reqHeaders  map[string]string
	respHeaders map[string]string
}

func routingCases() []routeCase {
	get := func(target, host string, header ...[2]string) rawReq {
		return rawReq{target: target, host: host, header: header}
	}
	const h = "www.example.com"
	return []routeCase{
		// Hosts.
		{name: "host exact", rq: get("/x", "api.example.com"), status: 200, pool: "api", target: "/x"},
		{name: "host with port", rq: get("/x", "api.example.com:8080"), status: 200, pool: "api", target: "/x"},
		{name: "host upper case", rq: get("/x", "API.Example.COM"), status: 200, pool: "api", target: "/x"},
		{name: "host trailing dot", rq: get("/x", "api.example.com."), status: 200, pool: "api", target: "/x"},
		{name: "host trailing dot and port", rq: get("/x", "api.example.com.:80"), status: 200, pool: "api", target: "/x"},
		{name: "host other name", rq: get("/x", "api.example.org"), status: 200, pool: "default", target: "/x"},
		{name: "host suffix is no label", rq: get("/x", "xapi.example.com"), status: 200, pool: "default", target: "/x"},
		{name: "host wildcard one label", rq: get("/x", "a.apps.example.com"), status: 200, pool: "wild", target: "/x"},
		{name: "host wildcard two labels", rq: get("/x", "a.b.apps.example.com:443"), status: 200, pool: "wild", target: "/x"},
		{name: "host wildcard upper case", rq: get("/x", "A.APPS.example.com"), status: 200, pool: "wild", target: "/x"},
		{name: "host wildcard not the domain itself", rq: get("/x", "apps.example.com"), status: 200, pool: "default", target: "/x"},
		{name: "host wildcard not a suffix without dot", rq: get("/x", "xapps.example.com"), status: 200, pool: "default", target: "/x"},
		{name: "host malformed port", rq: get("/x", "api.example.com:http"), status: 400},
		{name: "host unclosed bracket", rq: get("/x", "[::1"), status: 400},
		{name: "host with a space", rq: get("/x", "api.example.com x"), status: 400},
		{name: "host ipv6 literal", rq: get("/x", "[::1]:8080"), status: 200, pool: "default", target: "/x"},
		{name: "host empty label", rq: get("/x", "api..example.com"), status: 200, pool: "default", target: "/x"},
		{name: "host with userinfo", rq: get("/x", "evil@api.example.com"), status: 400},
		{name: "host absent", rq: rawReq{target: "/x", proto: "HTTP/1.0"}, status: 200, pool: "default", target: "/x"},
		{name: "host empty", rq: get("/x", "", [2]string{"Host", ""}), status: 200, pool: "default", target: "/x"},

		// Headers and query.
		{name: "header value", rq: get("/x", h, [2]string{"X-Env", "canary"}), status: 200, pool: "canary", target: "/x"},
		{name: "header name any case", rq: get("/x", h, [2]string{"x-env", "canary"}), status: 200, pool: "canary", target: "/x"},
		{name: "header other value", rq: get("/x", h, [2]string{"X-Env", "prod"}), status: 200, pool: "default", target: "/x"},
		{name: "header value case matters", rq: get("/x", h, [2]string{"X-Env", "Canary"}), status: 200, pool: "default", target: "/x"},
		{name: "header present", rq: get("/x", h, [2]string{"X-Debug", "anything"}), status: 200, pool: "debug", target: "/x"},
		{name: "header present empty", rq: get("/x", h, [2]string{"X-Debug", ""}), status: 200, pool: "debug", target: "/x"},
		{name: "query value", rq: get("/x?a=1&version=2", h), status: 200, pool: "query", target: "/x?a=1&version=2"},
		{name: "query value encoded", rq: get("/x?version=%32", h), status: 200, pool: "query", target: "/x?version=%32"},
		{name: "query other value", rq: get("/x?version=3", h), status: 200, pool: "default", target: "/x?version=3"},
		{name: "query name is exact", rq: get("/x?Version=2", h), status: 200, pool: "default", target: "/x?Version=2"},
		{name: "query present", rq: get("/x?flag", h), status: 200, pool: "flag", target: "/x?flag"},
		{name: "query present with value", rq: get("/x?flag=no", h), status: 200, pool: "flag", target: "/x?flag=no"},

		// Paths: prefix segment-wise, strip, replace, exact.
		{name: "strip prefix", rq: get("/svc/users?id=1", h), status: 200, pool: "strip", target: "/users?id=1"},
		{name: "strip prefix alone", rq: get("/svc", h), status: 200, pool: "strip", target: "/"},
		{name: "strip prefix slash", rq: get("/svc/", h), status: 200, pool: "strip", target: "/"},
		{name: "prefix is segment-wise", rq: get("/svcx", h), status: 200, pool: "default", target: "/svcx"},
		{name: "prefix after normalising", rq: get("//svc//a/./b", h), status: 200, pool: "strip", target: "/a/b"},
		{name: "replace prefix", rq: get("/v1/users", h), status: 200, pool: "replace", target: "/v2/users"},
		{name: "replace prefix alone", rq: get("/v1", h), status: 200, pool: "replace", target: "/v2"},
		{name: "replace prefix is segment-wise", rq: get("/v10", h), status: 200, pool: "default", target: "/v10"},
		{name: "exact path", rq: get("/exact", h), status: 200, pool: "exact", target: "/exact"},
		{name: "exact path with query", rq: get("/exact?x=1", h), status: 200, pool: "exact", target: "/exact?x=1"},
		{name: "exact path not below", rq: get("/exact/x", h), status: 200, pool: "default", target: "/exact/x"},
		{name: "exact path encoded", rq: get("/%65xact", h), status: 200, pool: "exact", target: "/exact"},

		// Methods.
		{name: "method listed", rq: rawReq{method: "POST", target: "/w/1", host: h, header: [][2]string{{"Content-Length", "0"}}}, status: 200, pool: "writes", target: "/w/1"},
		{name: "method listed PUT", rq: rawReq{method: "PUT", target: "/w", host: h, header: [][2]string{{"Content-Length", "0"}}}, status: 200, pool: "writes", target: "/w"},
		{name: "method not listed", rq: get("/w/1", h), status: 200, pool: "default", target: "/w/1"},
		{name: "method case matters", rq: rawReq{method: "post", target: "/w/1", host: h, header: [][2]string{{"Content-Length", "0"}}}, status: 200, pool: "default", target: "/w/1"},

		// The first match wins.
		{name: "first match host before header", rq: get("/x", "api.example.com", [2]string{"X-Env", "canary"}), status: 200, pool: "api", target: "/x"},
		{name: "first match header before path", rq: get("/svc/a", h, [2]string{"X-Env", "canary"}), status: 200, pool: "canary", target: "/svc/a"},
		{name: "first match query before path", rq: get("/svc/a?version=2", h), status: 200, pool: "query", target: "/svc/a?version=2"},
		{name: "first match redirect before host", rq: get("/old", "api.example.com"), status: 301, location: "https://new.example.com:8443/new"},

		// What no route takes.
		{name: "default pool", rq: get("/nothing/here", h), status: 200, pool: "default", target: "/nothing/here"},
		{name: "default pool normalised", rq: get("/a/%7Eb/../c", h), status: 200, pool: "default", target: "/a/c"},

		// Redirects.
		{name: "redirect fixed", rq: get("/old", h), status: 301, location: "https://new.example.com:8443/new"},
		{name: "redirect keeps query", rq: get("/old?a=1", h), status: 301, location: "https://new.example.com:8443/new?a=1"},
		{name: "redirect same place", rq: get("/moved/x?y=1", "Www.Example.com:8080"), status: 308, location: "https://www.example.com/moved/x?y=1"},
		{name: "redirect normalised path", rq: get("/moved/a/../b", h), status: 308, location: "https://www.example.com/moved/b"},
		{name: "redirect needs a host", rq: get("/moved/x", "", [2]string{"Host", ""}), status: 400},

		// Header changes.
		{name: "request and response headers", rq: get("/x", "api.example.com",
			[2]string{"X-Req-Set", "client"}, [2]string{"X-Req-Drop", "client"}, [2]string{"X-Req-Add", "client"}),
			status: 200, pool: "api", target: "/x",
			reqHeaders:  map[string]string{"X-Req-Set": "relay", "X-Req-Drop": "", "X-Req-Add": "client,one"},
			respHeaders: map[string]string{"X-Resp-Set": "relay", "X-Resp-Drop": "", "X-Resp-Add": "one"}},
		{name: "other routes change no headers", rq: get("/x", h, [2]string{"X-Req-Drop", "client"}),
			status: 200, pool: "default", target: "/x",
			reqHeaders:  map[string]string{"X-Req-Drop": "client", "X-Req-Add": ""},
			respHeaders: map[string]string{"X-Resp-Set": "backend", "X-Resp-Drop": "backend", "X-Resp-Add": ""}},
	}
}

// TestRoutingTable sends every case over both front doors to a relay built
// from routingYAML over real backends, and checks who answered, the target
// the backend got, redirects and header changes.
func TestRoutingTable(t *testing.T) {
	rep, _ := echoes(t, routingPools...)
	r := startRelay(t, rep.Replace(routingYAML), Options{})
	for _, s := range sends {
		t.Run(s.proto, func(t *testing.T) {
			for _, c := range routingCases() {
				t.Run(c.name, func(t *testing.T) {
					checkCase(t, c, s.send(t, r.addr, c.rq))
				})
			}
		})
	}
}

// checkCase checks a reply against what c says must come of it.
func checkCase(t *testing.T, c routeCase, got reply) {
	t.Helper()
	if got.status != c.status {
		t.Fatalf("%s %q Host %q: status %d, want %d; reply %v", c.rq.method, c.rq.target, c.rq.host, got.status, c.status, &got)
	}
	s := got.seen()
	switch {
	case c.pool == "" && s != nil:
		t.Fatalf("%q reached the backend of pool %s (target %q); want relay to answer", c.rq.target, s.Who, s.Target)
	case c.pool != "" && s == nil:
		t.Fatalf("%q: no backend answered; want pool %s; reply %v", c.rq.target, c.pool, &got)
	case s != nil && s.Who != c.pool:
		t.Fatalf("%q reached pool %s; want %s", c.rq.target, s.Who, c.pool)
	case s != nil && s.Target != c.target:
		t.Fatalf("%q reached pool %s as %q; want %q", c.rq.target, s.Who, s.Target, c.target)
	}
	if loc := got.header.Get("Location"); loc != c.location {
		t.Errorf("Location %q, want %q", loc, c.location)
	}
	if c.location != "" && len(got.body) != 0 {
		t.Errorf("a redirect has the body %q; want none", got.body)
	}
	for name, want := range c.reqHeaders {
		if v := strings.Join(s.Headers[http.CanonicalHeaderKey(name)], ","); v != want {
			t.Errorf("the backend got %s %q, want %q", name, v, want)
		}
	}
	for name, want := range c.respHeaders {
		if v := strings.Join(got.header.Values(name), ","); v != want {
			t.Errorf("the client got %s %q, want %q", name, v, want)
		}
	}
}

// Without a default pool, what no route takes is answered 404 with a
// short text body, over both doors, and no backend sees it.
func TestRoutingNoDefaultPool(t *testing.T) {
	rep, _ := echoes(t, "api")
	r := startRelay(t, rep.Replace(`
pools:
  api: {backends: [$api]}
routes:
  - match: {host: api.example.com}
    pool: api
`), Options{})
	for _, s := range sends {
		t.Run(s.proto, func(t *testing.T) {
			got := s.send(t, r.addr, rawReq{target: "/x", host: "www.example.com"})
			if got.status != 404 || got.seen() != nil {
				t.Fatalf("no route and no default pool: %v; want relay's 404", &got)
			}
			if ct := got.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("the 404 is %q; want text/plain", ct)
			}
			if len(got.body) == 0 || len(got.body) > 200 {
				t.Errorf("the 404's body is %q; want a short text", got.body)
			}
			checkCase(t, routeCase{status: 200, pool: "api", target: "/x"}, s.send(t, r.addr, rawReq{target: "/x", host: "api.example.com"}))
		})
	}
}

// An HTTP/1.1 request without Host is refused before routing (RFC 9112
// section 3.2), so it cannot fall into a host rule; without Host in
// HTTP/1.0, or :authority in HTTP/2, it matches no host rule ("host
// absent" in routingCases).
func TestRoutingHTTP11WithoutHost(t *testing.T) {
	rep, _ := echoes(t, routingPools...)
	r := startRelay(t, rep.Replace(routingYAML), Options{})
	got := sendH1(t, r.addr, rawReq{target: "/x"})
	if got.status != 400 || got.seen() != nil {
		t.Fatalf("HTTP/1.1 without Host: %v; want relay's 400", &got)
	}
}

// Over TLS, with both front doors: a route matches on the Host header, not
// on the name the client sent by SNI, and the redirect to https that
// matches scheme http lets https requests through to the routes after it.
func TestRoutingOverTLS(t *testing.T) {
	rep, _ := echoes(t, routingPools...)
	r := startRelay(t, rep.Replace(routingYAML), Options{})
	dial := r.serveTLS(t)
	cases := []struct {
		sni string
		c   routeCase
	}{
		{"www.example.com", routeCase{name: "host not sni", rq: rawReq{target: "/x", host: "api.example.com"}, status: 200, pool: "api", target: "/x"}},
		{"api.example.com", routeCase{name: "sni not host", rq: rawReq{target: "/x", host: "www.example.com"}, status: 200, pool: "default", target: "/x"}},
		{"www.example.com", routeCase{name: "https passes the http redirect", rq: rawReq{target: "/moved/x", host: "www.example.com"}, status: 200, pool: "default", target: "/moved/x"}},
		{"www.example.com", routeCase{name: "redirect for any scheme", rq: rawReq{target: "/old", host: "www.example.com"}, status: 301, location: "https://new.example.com:8443/new"}},
	}
	for _, tc := range cases {
		t.Run(tc.c.name, func(t *testing.T) {
			checkCase(t, tc.c, sendH1On(t, dial(tc.sni, "http/1.1"), tc.c.rq))
			checkCase(t, tc.c, sendH2On(t, dial(tc.sni, "h2"), "https", tc.c.rq))
		})
	}
}
