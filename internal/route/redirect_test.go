package route

import (
	"errors"
	"testing"
)

func TestRedirect(t *testing.T) {
	tab := mustNew(t, []Spec{
		{Name: "https", Hosts: []string{"plain.test"}, Redirect: &Redirect{Status: 301, Scheme: "https"}},
		{Name: "port", Hosts: []string{"port.test"}, Redirect: &Redirect{Status: 308, Scheme: "https", Port: 8443}},
		{Name: "host", Hosts: []string{"old.test"}, Redirect: &Redirect{Status: 302, Host: "new.test"}},
		{Name: "path", PathPrefix: "/moved", Redirect: &Redirect{Status: 307, Path: "/here"}},
		{Name: "strip", PathPrefix: "/old", StripPrefix: true, Redirect: &Redirect{Status: 303}},
		{Name: "pool", PathPrefix: "/p"},
		{Name: "star", Redirect: &Redirect{Status: 301, Scheme: "https"}},
	}, Reject)
	tests := []struct {
		name, method, target, host, scheme string
		status                             int
		location                           string
		err                                error
	}{
		{"to https, port dropped", "GET", "/a/../b?x=1", "Plain.Test:8080", "http", 301, "https://plain.test/b?x=1", nil},
		{"explicit port", "GET", "/", "port.test", "http", 308, "https://port.test:8443/", nil},
		{"other host, request scheme", "GET", "/a?", "old.test", "https", 302, "https://new.test/a?", nil},
		{"fixed path keeps query", "GET", "/moved/x?q=%2F", "h.test", "http", 307, "http://h.test/here?q=%2F", nil},
		{"rewritten path", "GET", "/old/x", "h.test", "http", 303, "http://h.test/x", nil},
		{"same host and scheme keep the port", "GET", "/old/x", "[::1]:81", "http", 303, "http://[::1]:81/x", nil},
		{"same host without a port", "GET", "/old/x", "h.test", "http", 303, "http://h.test/x", nil},
		{"same host with an empty port", "GET", "/old/x", "h.test:", "http", 303, "http://h.test/x", nil},
		{"IPv6 with an empty port", "GET", "/old/x", "[::1]:", "http", 303, "http://[::1]/x", nil},
		{"star gets root", "OPTIONS", "*", "h.test", "http", 301, "https://h.test/", nil},
		{"no host", "GET", "/old/x", "", "http", 0, "", ErrNoHost},
	}
	var m Match
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := request(tt.method, tt.target, tt.host)
			if ok, err := tab.Match(req, &m); !ok || err != nil {
				t.Fatalf("Match: %v %v", ok, err)
			}
			status, loc, ok, err := tab.Redirect(&m, req, tt.scheme)
			if !ok || !errors.Is(err, tt.err) || status != tt.status || string(loc) != tt.location {
				t.Errorf("Redirect = %d %q %v %v; want %d %q %v", status, loc, ok, err, tt.status, tt.location, tt.err)
			}
		})
	}
	req := request("GET", "/p", "h.test")
	tab.Match(req, &m)
	if _, _, ok, _ := tab.Redirect(&m, req, "http"); ok {
		t.Errorf("a route with a pool redirects")
	}
	req = request("GET", "/a?x", "plain.test")
	if n := testing.AllocsPerRun(100, func() {
		tab.Match(req, &m)
		tab.Redirect(&m, req, "http")
	}); n != 0 {
		t.Errorf("Match and Redirect allocate: %v per run", n)
	}
}

func TestExplain(t *testing.T) {
	tab := mustNew(t, []Spec{
		{Name: "www", Hosts: []string{"www.example.com"}, Target: 3},
		{Name: "api", PathPrefix: "/api", Methods: []string{"POST"}, Target: 4},
		{Name: "exact", Path: "/x", Headers: []KV{{"X-Env", "canary"}}, Query: []KV{{"v", "2"}}, Target: 5},
		{Name: "users", Hosts: []string{"*.example.com"}, PathPrefix: "/api/users", StripPrefix: true, Target: 6},
		{Name: "redirect", Hosts: []string{"old.example.com"}, Redirect: &Redirect{Status: 301, Scheme: "https"}},
	}, Reject)
	e := tab.Explain("GET", "/api/../api/users/7?a=b", "api.example.com:443", [][2]string{{"X-Env", "prod"}})
	if e.Err != nil || e.Name != "users" || e.Pool != 6 || e.Path != "/api/users/7" || e.Target != "/7?a=b" {
		t.Fatalf("Explain = %+v", e)
	}
	want := [][]string{
		{"host api.example.com does not match www.example.com"},
		{"method GET is not POST"},
		{"path /api/users/7 is not /x", `header x-env is not "canary" (sent "prod")`, "query parameter v is absent"},
		{"host api.example.com matches *.example.com", "path /api/users/7 is under /api/users"},
	}
	if len(e.Steps) != len(want) {
		t.Fatalf("steps: %+v", e.Steps)
	}
	for i, s := range e.Steps {
		if s.Matched != (i == 3) || s.Route != i || len(s.Reasons) != len(want[i]) {
			t.Fatalf("step %d = %+v, want reasons %q", i, s, want[i])
		}
		for j := range want[i] {
			if s.Reasons[j] != want[i][j] {
				t.Errorf("step %d reason %d = %q, want %q", i, j, s.Reasons[j], want[i][j])
			}
		}
	}

	e = tab.Explain("GET", "http://old.example.com/a?b", "", nil)
	if e.Name != "redirect" || e.RedirectStatus != 301 || e.Redirect != "https://old.example.com/a?b" || e.Pool != -1 {
		t.Errorf("absolute URL redirect: %+v", e)
	}
	e = tab.Explain("GET", "/nothing", "", nil)
	if e.Route != -1 || len(e.Steps) != 5 || e.Steps[0].Reasons[0] != `request host "" is empty or malformed; the route needs host www.example.com` {
		t.Errorf("no match: %+v", e)
	}
	e = tab.Explain("GET", "/a/..%2f", "www.example.com", nil)
	if !errors.Is(e.Err, ErrEscapedSlash) || e.Route != -1 || len(e.Steps) != 0 {
		t.Errorf("refused: %+v", e)
	}
	if s := e.String(); s != "refused: route: encoded slash or backslash in the path\n" {
		t.Errorf("String() = %q", s)
	}
}
