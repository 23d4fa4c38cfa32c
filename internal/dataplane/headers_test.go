package dataplane

import (
	"net/http"
	"strings"
	"testing"
)

// A route's request_headers set replaces every field of that name
// (docs/configuration.md), relay's own too: X-Forwarded-Proto and
// X-Request-Id, which the core's features write before the route's
// changes run, reach the backend once, with the route's values.
func TestRouteSetReplacesRelaysOwnFields(t *testing.T) {
	rep, _ := echoes(t, "a")
	r := startRelay(t, rep.Replace(`
backends: [$a]
routes:
  - name: tls
    match: {path_prefix: /}
    pool: default
    request_headers:
      set: {X-Forwarded-Proto: https, X-Request-Id: fixed}
`), Options{})
	got := sendH1(t, r.addr, rawReq{target: "/x", host: "example.com"})
	s := got.seen()
	if s == nil {
		t.Fatalf("no echo: %v", &got)
	}
	if v := s.Headers.Values("X-Forwarded-Proto"); len(v) != 1 || v[0] != "https" {
		t.Errorf("backend got X-Forwarded-Proto %q, want only the route's [https]", v)
	}
	if v := s.Headers.Values("X-Request-Id"); len(v) != 1 {
		t.Errorf("backend got X-Request-Id %q, want one value", v)
	}
}

// A route's response_headers remove keeps a field from the client in an
// informational response (103 Early Hints) the backend sends first too.
func TestRouteRemoveReachesInterimResponses(t *testing.T) {
	be := serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Secret", "internal")
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(103)
		w.Header().Del("Link")
		w.Write([]byte("ok"))
	}))
	r := startRelay(t, `
backends: [`+be+`]
routes:
  - name: strip
    match: {path_prefix: /}
    pool: default
    response_headers:
      remove: [X-Secret]
`, Options{})
	nc := dialTCP(t, r.addr)
	defer nc.Close()
	if _, err := nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	var all []byte
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		all = append(all, buf[:n]...)
		if err != nil {
			break
		}
	}
	text := string(all)
	if !strings.HasPrefix(text, "HTTP/1.1 103") {
		t.Fatalf("no 103 first: %q", text)
	}
	if strings.Contains(strings.ToLower(text), "x-secret") {
		t.Errorf("the field the route removes reached the client:\n%s", text)
	}
}
