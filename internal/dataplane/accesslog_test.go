package dataplane

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"relay/internal/logging"
)

// accessLine is the part of an access log line these tests read.
type accessLine struct {
	Path    string `json:"path"`
	Proto   string `json:"proto"`
	Status  int    `json:"status"`
	Backend string `json:"backend"`
	Pool    string `json:"pool"`
	Route   string `json:"route"`
}

// The access log names the route that matched and the pool that served
// each request, over both front doors: "" for the route when none matched
// and for the pool when relay answered itself (redirect, refused path, no
// route without a default pool). The path is the target as the client
// sent it, not the one the backend got.
func TestAccessLogNamesRouteAndPool(t *testing.T) {
	var buf bytes.Buffer
	log := logging.NewAccessLog(&buf)
	rep, backends := echoes(t, append(routingPools, "other")...)
	r := startRelay(t, rep.Replace(routingYAML), Options{AccessLog: log})
	bare := startRelay(t, rep.Replace(`
pools:
  other: {backends: [$other]}
routes:
  - match: {path_prefix: /other}
    pool: other
`), Options{AccessLog: log})

	type want struct {
		relay          *testRelay
		target, host   string
		status         int
		route, pool, b string
	}
	cases := []want{
		{r, "/x?n=api", "api.example.com", 200, "api", "api", "api"},
		{r, "/x?n=api2", "api.example.com", 200, "api", "api", "api"},
		{r, "/svc/a?n=strip", "www.example.com", 200, "strip", "strip", "strip"},
		{r, "/x?n=default", "www.example.com", 200, "", "default", "default"},
		{r, "/old?n=redirect", "www.example.com", 301, "old", "", ""},
		{r, "/a/..%2Fb?n=refused", "www.example.com", 400, "", "", ""},
		{bare, "/other/x?n=unnamed", "www.example.com", 200, "routes[0]", "other", "other"},
		{bare, "/x?n=none", "www.example.com", 404, "", "", ""},
	}
	for _, s := range sends {
		for _, c := range cases {
			if got := s.send(t, c.relay.addr, rawReq{target: c.target, host: c.host}); got.status != c.status {
				t.Fatalf("%s %s: status %d, want %d", s.proto, c.target, got.status, c.status)
			}
		}
	}
	// A request's line is logged once its answer is written: wait for the
	// connections to end so that every line is in before the log closes.
	for _, rl := range []*testRelay{r, bare} {
		waitFor(t, "the relay's connections to end", func() bool { return rl.proxy.Connections() == 0 })
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	lines := map[string]accessLine{}
	raw := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(raw) != 2*len(cases) {
		t.Errorf("%d access log lines, want %d:\n%s", len(raw), 2*len(cases), buf.String())
	}
	for _, l := range raw {
		var al accessLine
		if err := json.Unmarshal([]byte(l), &al); err != nil {
			t.Fatalf("access log line %q: %v", l, err)
		}
		lines[al.Proto+" "+al.Path] = al
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		for _, c := range cases {
			al, ok := lines[proto+" "+c.target]
			if !ok {
				t.Errorf("no access log line for %s %s:\n%s", proto, c.target, buf.String())
				continue
			}
			wantBackend := ""
			if c.b != "" {
				wantBackend = strings.TrimPrefix(backends[c.b].url, "http://")
			}
			if al.Status != c.status || al.Route != c.route || al.Pool != c.pool || strings.TrimPrefix(al.Backend, "http://") != wantBackend {
				t.Errorf("%s %s logged status %d route %q pool %q backend %q; want %d %q %q %q",
					proto, c.target, al.Status, al.Route, al.Pool, al.Backend, c.status, c.route, c.pool, wantBackend)
			}
		}
	}
}
