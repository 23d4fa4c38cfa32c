package main

import (
	"strings"
	"testing"
)

// relay -explain prints how the file's routes take one request: every
// route tried, why, and where the request ends, with exit 0 when a pool
// or a redirect takes it and 1 when relay would answer 404 or 400.
func TestExplain(t *testing.T) {
	t.Parallel()
	path := writeFile(t, t.TempDir(), "routes.yml", `
escaped_slashes: reject
pools:
  api:
    backends: [http://127.0.0.1:9001]
    rate_limit: {rate: 100, key: route}
  public:
    backends: [http://127.0.0.1:9002]
routes:
  - name: api
    match: {host: api.example.com, path_prefix: /v1}
    pool: api
    replace_prefix: /v2
    rate_limit: {rate: 5, burst: 10, key: "header:X-Api-Key"}
  - name: public
    match: {path_prefix: /public}
    pool: public
    strip_prefix: true
`)
	for _, tt := range []struct {
		name    string
		args    []string
		code    int
		want    []string
		notWant string
	}{
		{"a route and its rewrite", []string{"-explain", "GET https://api.example.com/v1/users?id=3"}, 0,
			[]string{"MATCH api: host api.example.com matches api.example.com; path /v1/users is under /v1", "route api -> pool api, backend gets /v2/users?id=3",
				"rate limit of route api: 5 a second, burst 10, per value of X-Api-Key, in relay's memory\n  rate limit of pool api: 100 a second, burst 100, shared by all its requests"}, ""},
		{"an earlier route that does not match says why", []string{"-explain", "GET /public/a", "-header", "Host: www.example.com"}, 0,
			[]string{"no    api: host www.example.com does not match api.example.com; path /public/a is not under /v1", "route public -> pool public, backend gets /a"}, "rate limit of"},
		{"a climbing path is matched where it lands", []string{"-explain", "GET /public/../v1/x", "-header", "Host: api.example.com"}, 0,
			[]string{"normalised path: /v1/x", "pool api"}, "pool public"},
		{"an encoded slash is refused", []string{"-explain", "GET /public/..%2Fv1/x"}, 1, []string{"refused with 400"}, ""},
		{"no route and no default pool", []string{"-explain", "GET /other"}, 1, []string{"no route matches and there is no default pool: 404"}, ""},
		{"not METHOD URL", []string{"-explain", "/v1"}, 2, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runRelay(t, append([]string{"-config", path}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, stdout)
				}
			}
			if tt.notWant != "" && strings.Contains(stdout, tt.notWant) {
				t.Errorf("output has %q:\n%s", tt.notWant, stdout)
			}
		})
	}
}

// relay -explain lists the features a request meets, in their order and
// with their phases: the core's, then the route's (compression from the
// pool, what its backend hears of client certificates, the route's
// header changes) or, for a request no route takes, the
// default pool's.
func TestExplainFeatures(t *testing.T) {
	t.Parallel()
	path := writeFile(t, t.TempDir(), "features.yml", `
request_id: true
access_log: false
backends: [http://127.0.0.1:9000]
pools:
  api:
    backends: [http://127.0.0.1:9001]
    compress: true
routes:
  - name: api
    match: {path_prefix: /api}
    pool: api
    response_headers: {remove: [Server]}
    client_cert_headers: fields
`)
	core := "  feature misdirected requests (421): admit\n" +
		"  feature forwarded fields: upstream request\n" +
		"  feature client certificate fields removed: upstream request\n" +
		"  feature via and loop check: admit, upstream request\n" +
		"  feature rate limits: admit\n" +
		"  feature request id: accept, upstream request, response head\n"
	for _, tt := range []struct {
		target, want string
	}{
		{"GET /api/x", core + "  feature compress: upstream request, response head, response body\n" +
			"  feature client certificate to backends (X-Client-Cert-*): upstream request\n" +
			"  feature header changes: upstream request, response head\n"},
		{"GET /other", core},
	} {
		code, stdout, stderr := runRelay(t, "-config", path, "-explain", tt.target)
		if code != 0 {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", tt.target, code, stdout, stderr)
		}
		_, features, _ := strings.Cut(stdout, "  feature ")
		if got := "  feature " + features; got != tt.want {
			t.Errorf("%s: features\n%s\nwant\n%s", tt.target, got, tt.want)
		}
	}
}
