package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// stickyGet sends GET / on a new connection, with the cookie SRV=cookie
// unless it is "", and returns the body (which names the backend) and the
// SRV value the response sets ("" when it sets none).
func stickyGet(t *testing.T, c *http.Client, addr, cookie string) (body, set string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	if cookie != "" {
		req.Header.Set("Cookie", "SRV="+cookie)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /: %d %q %v", resp.StatusCode, b, err)
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == "SRV" {
			set = ck.Value
		}
	}
	return string(b), set
}

// A sticky cookie one serving process set is honoured by every other (the
// control hands them one key): 32 new connections, which the kernel spreads
// over both processes, all reach the cookie's backend and get no new
// cookie. Two relays that share sticky.key honour each other's cookies.
func TestStickyCookieHonouredByEveryProcessAndInstance(t *testing.T) {
	t.Parallel()
	forProcesses(t, func(t *testing.T, processes int) {
		bs := newBackends(t, 3)
		conf := "processes: " + string(rune('0'+processes)) + "\n" + backendsYAML(urlsOf(bs))
		own, _ := startRelay(t, "", "-config", writeConfig(t, conf+"sticky:\n  cookie: SRV\n"))
		shared := conf + "sticky:\n  cookie: SRV\n  key: shared-by-two-instances\n"
		one, _ := startRelay(t, "", "-config", writeConfig(t, shared))
		two, _ := startRelay(t, "", "-config", writeConfig(t, shared))
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
		check := func(what string, from, to *relay) {
			t.Helper()
			// Three first requests land on three backends (round robin in
			// one process; with two, at least on two).
			for range 3 {
				body, v := stickyGet(t, c, from.addr, "")
				if v == "" {
					t.Fatalf("%s: the first answer set no cookie", what)
				}
				for i := range 32 {
					if got, set := stickyGet(t, c, to.addr, v); got != body || set != "" {
						t.Fatalf("%s: request %d with the cookie of %q got %q and cookie %q", what, i, body, got, set)
					}
				}
			}
		}
		check("one relay", own, own)
		check("two relays sharing the key", one, two)
	})
}

// With indirect and nocache, under processes: 2, over HTTP/1.1 and h2c
// (whose Go client splits the Cookie field into one field per cookie):
// the first answer sets the cookie and is private, merged into the
// backend's Cache-Control; then every request, on new connections the
// kernel spreads over both processes, reaches the cookie's backend
// without the sticky cookie but with the others, and its answer, which
// sets no cookie, keeps the backend's Cache-Control as it was.
func TestStickyIndirectNoCacheWithTwoProcesses(t *testing.T) {
	t.Parallel()
	bs := make([]*backendServer, 3)
	for i := range bs {
		bs[i] = newBackend(t, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Got-Cookie", strings.Join(r.Header.Values("Cookie"), " | "))
				w.Header().Set("Cache-Control", "max-age=60")
				h.ServeHTTP(w, r)
			})
		})
	}
	conf := "processes: 2\nh2c: true\n" + backendsYAML(urlsOf(bs)) + "sticky:\n  cookie: SRV\n  indirect: true\n  nocache: true\n"
	r, _ := startRelay(t, "", "-config", writeConfig(t, conf))
	for _, proto := range []string{"HTTP/1.1", "h2c"} {
		// A new connection for each request.
		send := func(cookie string) (body, set, got, cc string) {
			t.Helper()
			tr := &http.Transport{DisableKeepAlives: true}
			if proto == "h2c" {
				tr.Protocols = new(http.Protocols)
				tr.Protocols.SetUnencryptedHTTP2(true)
			}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest("GET", r.url("/"), nil)
			if cookie != "" {
				req.Header.Set("Cookie", cookie)
			}
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s GET /: %d %q %v", proto, resp.StatusCode, b, err)
			}
			if resp.Proto != map[string]string{"HTTP/1.1": "HTTP/1.1", "h2c": "HTTP/2.0"}[proto] {
				t.Fatalf("%s: the answer came over %s", proto, resp.Proto)
			}
			for _, ck := range resp.Cookies() {
				if ck.Name == "SRV" {
					set = ck.Value
				}
			}
			return string(b), set, resp.Header.Get("X-Got-Cookie"), strings.Join(resp.Header.Values("Cache-Control"), " | ")
		}
		body, v, got, cc := send("a=1")
		if v == "" || cc != "max-age=60, private" || got != "a=1" {
			t.Fatalf("%s, first request: cookie %q, Cache-Control %q, the backend got Cookie %q", proto, v, cc, got)
		}
		// Go's HTTP/2 client splits the field, relay joins it again.
		const want = "a=1; b=2"
		for i := range 16 {
			again, set, got, cc := send("a=1; SRV=" + v + "; b=2")
			if again != body || set != "" {
				t.Fatalf("%s, request %d with the cookie of %q: answered %q, cookie %q", proto, i, body, again, set)
			}
			if got != want || cc != "max-age=60" {
				t.Fatalf("%s, request %d: the backend got Cookie %q (want %q), the client Cache-Control %q (want max-age=60)", proto, i, got, want, cc)
			}
		}
	}
}
