package admin

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// drainPath is the drain action of the pool's first backend.
var drainPath = "/api/backends/" + url.PathEscape(poolURLs[0]) + "/drain"

// everyRoute is one request of each kind the admin listener serves.
var everyRoute = []struct{ method, path, body string }{
	{"GET", "/", ""},
	{"GET", "/ui/app.js", ""},
	{"GET", "/metrics", ""},
	{"GET", "/healthz", ""},
	{"GET", "/readyz", ""},
	{"GET", "/api/backends", ""},
	{"GET", "/debug/pprof/", ""},
	{"GET", "/debug/pprof/cmdline", ""},
	{"POST", drainPath, ""},
	{"POST", "/api/backends", `{"url": "http://127.0.0.1:9", "weight": 1000}`},
	{"DELETE", "/api/backends/" + url.PathEscape(poolURLs[1]), ""},
	{"GET", "/api/pools", ""},
	{"GET", "/api/pools/default/backends", ""},
	{"POST", "/api/pools/default/backends/" + url.PathEscape(poolURLs[0]) + "/drain", ""},
	{"PATCH", "/api/pools/default/backends/" + url.PathEscape(poolURLs[0]), `{"weight": 3}`},
	{"POST", "/api/pools/default/backends", `{"url": "http://127.0.0.1:9", "weight": 1000}`},
	{"DELETE", "/api/pools/default/backends/" + url.PathEscape(poolURLs[1]), ""},
	{"POST", "/reload", ""},
}

// TestHostMustNameTheListener: a request whose Host is not the admin
// listener's, as after DNS rebinding, is refused on every route with 421
// and changes nothing; the listener's own names are served.
func TestHostMustNameTheListener(t *testing.T) {
	a := newAdmin(t, Options{AllowedHosts: []string{"relay-admin.test", "proxy.test:8443"}})
	port := a.port()
	for _, host := range []string{
		"attacker.test:" + port, "attacker.test", "ATTACKER.test:" + port,
		"localhost.attacker.test:" + port, "127.0.0.1.attacker.test:" + port, "sub.localhost:" + port,
		"proxy.test:" + port, "proxy.test", "relay-admin.test.:" + port, "10.9.9.9:" + port,
	} {
		for _, r := range everyRoute {
			got := a.call(t, r.method, r.path, r.body, "Host", host, "Content-Type", "application/json")
			if got.code != 421 || !strings.Contains(got.errorText(), "does not name this admin listener") ||
				!strings.Contains(got.errorText(), "admin_allowed_hosts") {
				t.Errorf("%s %s with Host %s: %d %q; want 421 naming the Host", r.method, r.path, host, got.code, got.short())
			}
		}
	}
	if s := a.state(); s != initialState() {
		t.Fatalf("requests with a foreign Host changed the pool:\n%s", s)
	}
	for _, host := range []string{
		"127.0.0.1:" + port, "localhost:" + port, "LocalHost:" + port, "[::1]:" + port, "127.0.0.1",
		"localhost:8000", // an SSH tunnel's or port-forward's local port
		"relay-admin.test:" + port, "relay-admin.test", "proxy.test:8443",
	} {
		if got := a.call(t, "GET", "/api/backends", "", "Host", host); got.code != 200 {
			t.Errorf("GET /api/backends with Host %s: %d %q; want 200", host, got.code, got.short())
		}
	}
	if got := a.call(t, "POST", drainPath, "", "Host", "relay-admin.test:"+port, "Content-Type", "application/json"); got.code != 200 || got.body["draining"] != true {
		t.Fatalf("drain through an allowed name: %d %q", got.code, got.short())
	}
}

// TestHostRulesOnOtherAddresses covers what a loopback test listener
// cannot: connections arriving on a non-loopback address.
func TestHostRulesOnOtherAddresses(t *testing.T) {
	h := newHostRules([]string{"relay-admin.internal", "[fd00::9]:9901"}, "")
	pod := netip.MustParseAddr("10.0.0.5")
	for _, tt := range []struct {
		host  string
		local netip.Addr
		want  bool
	}{
		{"10.0.0.5:9901", pod, true}, // Prometheus or a kubelet probe by pod IP
		{"10.0.0.5", pod, true},
		{"10.0.0.6:9901", pod, false},
		{"localhost:9901", pod, false}, // localhost is this machine only over loopback
		{"127.0.0.1:9901", pod, false},
		{"relay-admin.internal:9901", pod, true},
		{"[fd00::9]:9901", pod, true},
		{"[fd00::9]:9902", pod, false},
		{"[fd00::5]:9901", netip.MustParseAddr("fd00::5"), true},
		{"[::ffff:10.0.0.5]:9901", pod, true},
		{"", pod, false},
		{":9901", pod, false},
		{"attacker.test:9901", netip.MustParseAddr("127.0.0.1"), false},
		{"localhost:9901", netip.Addr{}, false},
	} {
		if got := h.allows(tt.host, tt.local); got != tt.want {
			t.Errorf("Host %q on %v: allowed %v, want %v", tt.host, tt.local, got, tt.want)
		}
	}
}

// TestCrossOriginRequestsAreRefused: an Origin other than the listener's
// own, and a Sec-Fetch-Site other than same-origin or none, are refused
// with 403 on every route, and nothing changes.
func TestCrossOriginRequestsAreRefused(t *testing.T) {
	a := newAdmin(t, Options{AllowedHosts: []string{"relay-admin.test"}})
	port := a.port()
	for _, fields := range [][]string{
		{"Origin", "http://attacker.test"},
		{"Origin", "http://127.0.0.1:8000"}, // another port on this machine
		{"Origin", "http://localhost:8000"},
		{"Origin", "https://127.0.0.1:8000"},
		{"Origin", "null"},
		{"Origin", "http://relay-admin.test:8000"},
		{"Origin", "file://"},
		{"Origin", "http://127.0.0.1:" + port, "Origin", "http://attacker.test"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Sec-Fetch-Site", "sideways"},
		{"Origin", "http://127.0.0.1:" + port, "Sec-Fetch-Site", "same-site"},
	} {
		for _, r := range everyRoute {
			got := a.call(t, r.method, r.path, r.body, append([]string{"Content-Type", "application/json"}, fields...)...)
			if got.code != 403 || !strings.Contains(got.errorText(), "web pages on other origins") {
				t.Errorf("%s %s with %q: %d %q; want 403", r.method, r.path, fields, got.code, got.short())
			}
		}
	}
	if s := a.state(); s != initialState() {
		t.Fatalf("cross-origin requests changed the pool:\n%s", s)
	}

	// A link to the dashboard from another site opens the page, which
	// that site can neither read nor script; nothing else goes that way.
	nav := []string{"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "document"}
	if got := a.call(t, "GET", "/", "", nav...); got.code != 200 {
		t.Errorf("a navigation from another site to the dashboard: %d %q", got.code, got.short())
	}
	for _, path := range []string{"/api/backends", "/debug/pprof/", "/metrics"} {
		if got := a.call(t, "GET", path, "", nav...); got.code != 403 {
			t.Errorf("a navigation from another site to %s: %d, want 403", path, got.code)
		}
	}
	if got := a.call(t, "GET", "/", "", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "navigate", "Sec-Fetch-Dest", "iframe"); got.code != 403 {
		t.Errorf("the dashboard framed by another site: %d, want 403", got.code)
	}

	// The listener's own origin, as its dashboard sends it.
	for _, fields := range [][]string{
		{"Origin", "http://127.0.0.1:" + port, "Sec-Fetch-Site", "same-origin"},
		{"Origin", "http://relay-admin.test", "Host", "relay-admin.test"},
		{"Origin", "https://relay-admin.test", "Host", "127.0.0.1:" + port}, // behind a TLS proxy that sets Host
		{"Sec-Fetch-Site", "none"},
	} {
		got := a.call(t, "POST", drainPath, "", append([]string{"Content-Type", "application/json"}, fields...)...)
		if got.code != 200 || got.body["draining"] != true {
			t.Errorf("drain with %q: %d %q; want 200", fields, got.code, got.short())
		}
		if got := a.call(t, "POST", "/api/backends/"+url.PathEscape(poolURLs[0])+"/enable", "", append([]string{"Content-Type", "application/json"}, fields...)...); got.code != 200 {
			t.Errorf("enable with %q: %d %q; want 200", fields, got.code, got.short())
		}
	}
}

// TestChangesNeedJSON: a request that changes something must be
// Content-Type: application/json, body or not, so that neither a form nor
// a no-cors fetch from another page can send it; the error says what to
// add.
func TestChangesNeedJSON(t *testing.T) {
	a := newAdmin(t, Options{})
	for _, r := range everyRoute {
		if r.method == "GET" {
			continue
		}
		for _, ct := range [][]string{
			nil,
			{"Content-Type", "text/plain"},
			{"Content-Type", "text/plain;charset=UTF-8"},
			{"Content-Type", "application/x-www-form-urlencoded"},
			{"Content-Type", "multipart/form-data; boundary=x"},
			{"Content-Type", "application/jsonp"},
			{"Content-Type", "application/json", "Content-Type", "text/plain"},
		} {
			got := a.call(t, r.method, r.path, r.body, ct...)
			if got.code != 415 || !strings.Contains(got.errorText(), "needs Content-Type: application/json") ||
				!strings.Contains(got.errorText(), "-H 'Content-Type: application/json'") {
				t.Errorf("%s %s with %q: %d %q; want 415 saying what to send", r.method, r.path, ct, got.code, got.short())
			}
		}
	}
	if s := a.state(); s != initialState() {
		t.Fatalf("requests without JSON changed the pool:\n%s", s)
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		if got := a.call(t, "POST", drainPath, "", "Content-Type", ct); got.code != 200 {
			t.Errorf("drain with Content-Type %s: %d %q", ct, got.code, got.short())
		}
	}
	if got := a.call(t, "POST", "/reload", "", "Content-Type", "application/json"); got.code != 200 || a.reloads.Load() != 1 {
		t.Errorf("reload with JSON: %d %q, %d reloads", got.code, got.raw, a.reloads.Load())
	}
}

// TestPreflightIsRefused: no CORS preflight succeeds and no answer carries
// CORS headers, so a page on another origin cannot send JSON.
func TestPreflightIsRefused(t *testing.T) {
	a := newAdmin(t, Options{})
	for _, r := range everyRoute {
		got := a.call(t, "OPTIONS", r.path, "", "Origin", "http://attacker.test",
			"Access-Control-Request-Method", r.method, "Access-Control-Request-Headers", "content-type")
		if got.code != 403 || !strings.Contains(got.errorText(), "no CORS preflight") {
			t.Errorf("OPTIONS %s: %d %q; want 403", r.path, got.code, got.short())
		}
		for name := range got.header {
			if strings.HasPrefix(name, "Access-Control-") {
				t.Errorf("OPTIONS %s answered %s", r.path, name)
			}
		}
	}
	got := a.call(t, "GET", "/api/backends", "", "Origin", "http://127.0.0.1:"+a.port())
	for name := range got.header {
		if strings.HasPrefix(name, "Access-Control-") {
			t.Errorf("GET /api/backends answered %s", name)
		}
	}
}
