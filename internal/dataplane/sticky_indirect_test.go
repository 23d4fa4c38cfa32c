package dataplane

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"relay/internal/core"
)

// stickyKeyForTests is the sticky key the tests below give relay, so they
// can make valid cookies.
var stickyKeyForTests = []byte("0123456789abcdef0123456789abcdef")

// sendOverTLS sends rq over TLS with ALPN proto ("h2" or "http/1.1").
func sendOverTLS(t *testing.T, dial func(sni, proto string) net.Conn, proto string, rq rawReq) reply {
	t.Helper()
	rq.host = "www.example.com"
	if proto == "h2" {
		return sendH2On(t, dial(rq.host, proto), "https", rq)
	}
	return sendH1On(t, dial(rq.host, proto), rq)
}

// allSends are the raw clients of both front doors, in clear text and
// over TLS, on relay r.
func allSends(t *testing.T, r *testRelay) []struct {
	proto string
	send  func(rq rawReq) reply
} {
	dial := r.serveTLS(t)
	type send = struct {
		proto string
		send  func(rq rawReq) reply
	}
	return []send{
		{"HTTP/1.1", func(rq rawReq) reply { return sendH1(t, r.addr, rq) }},
		{"h2c", func(rq rawReq) reply { return sendH2(t, r.addr, rq) }},
		{"HTTP/1.1 over TLS", func(rq rawReq) reply { return sendOverTLS(t, dial, "http/1.1", rq) }},
		{"h2 over TLS", func(rq rawReq) reply { return sendOverTLS(t, dial, "h2", rq) }},
	}
}

// With indirect, the backend never sees the sticky cookie, valid or not,
// wherever it stands among the client's cookies, in one Cookie field or
// in HTTP/2's split ones; every other cookie reaches it byte for byte, in
// order, and a request whose only cookie was the sticky one reaches it
// with no Cookie field at all. The cookie still does its work: the
// request goes to the backend it names.
func TestStickyIndirectKeepsTheCookieFromTheBackend(t *testing.T) {
	rep, es := echoes(t, "a", "b", "c")
	r := startRelay(t, stickyYAML(rep, "  indirect: true\n"), Options{StickyKey: stickyKeyForTests})
	v := core.StickyValue(stickyKeyForTests, DefaultPool, es["b"].url)
	tampered := []byte(v)
	tampered[0] ^= 1
	cases := []struct {
		name   string
		fields []string // the client's Cookie fields
		want   []string // the Cookie fields the backend gets
		h2want []string // over HTTP/2, when it differs: split fields arrive joined
	}{
		{"only", []string{"SRV=" + v}, nil, nil},
		{"first", []string{"SRV=" + v + "; theme=dark; lang=en"}, []string{"theme=dark; lang=en"}, nil},
		{"middle", []string{"theme=dark; SRV=" + v + "; lang=en"}, []string{"theme=dark; lang=en"}, nil},
		{"last", []string{"theme=dark;lang=en;SRV=" + v}, []string{"theme=dark;lang=en"}, nil},
		{"quoted and odd values kept", []string{`q="a b"; SRV=` + v + `; e=; x=1=2`}, []string{`q="a b"; e=; x=1=2`}, nil},
		{"similar names kept", []string{"SRVX=1; XSRV=2; srv=3; SRV=" + v}, []string{"SRVX=1; XSRV=2; srv=3"}, nil},
		{"twice", []string{"SRV=" + v + "; theme=dark; SRV=" + v}, []string{"theme=dark"}, nil},
		{"split fields", []string{"theme=dark", "SRV=" + v, "lang=en"}, []string{"theme=dark", "lang=en"}, []string{"theme=dark; lang=en"}},
		{"split, only the sticky one", []string{"SRV=" + v, "SRV=" + v}, nil, nil},
	}
	for _, s := range allSends(t, r) {
		for _, tc := range cases {
			rq := rawReq{target: "/", host: "example.com"}
			for _, f := range tc.fields {
				rq.header = append(rq.header, [2]string{"Cookie", f})
			}
			got := s.send(rq)
			if b := who(t, got); b != "b" {
				t.Errorf("%s, %s: the cookie of b went to %s", s.proto, tc.name, b)
			}
			want := tc.want
			if tc.h2want != nil && strings.HasPrefix(s.proto, "h2") {
				want = tc.h2want
			}
			if seen := got.seen().Headers["Cookie"]; !slices.Equal(seen, want) {
				t.Errorf("%s, %s: sent Cookie %q, the backend got %q, want %q", s.proto, tc.name, tc.fields, seen, want)
			}
		}
		// A cookie that names no member is removed too, and replaced.
		got := s.send(rawReq{target: "/", host: "example.com", header: [][2]string{{"Cookie", "a=1; SRV=" + string(tampered) + "; b=2"}}})
		if seen := got.seen().Headers["Cookie"]; !slices.Equal(seen, []string{"a=1; b=2"}) {
			t.Errorf("%s, tampered cookie: the backend got Cookie %q, want [a=1; b=2]", s.proto, seen)
		}
		if stickyCookie(t, got) == "" {
			t.Errorf("%s, tampered cookie: no new cookie set", s.proto)
		}
		// Cookies without the sticky one go on exactly as they came.
		got = s.send(rawReq{target: "/", host: "example.com", header: [][2]string{{"Cookie", "a=1;b=2;  c=3"}}})
		if seen := got.seen().Headers["Cookie"]; !slices.Equal(seen, []string{"a=1;b=2;  c=3"}) {
			t.Errorf("%s, no sticky cookie: the backend got Cookie %q, want [a=1;b=2;  c=3]", s.proto, seen)
		}
	}
}

// Without indirect (the default), the backend gets the sticky cookie as
// the client sent it.
func TestStickyDirectPassesTheCookieOn(t *testing.T) {
	rep, es := echoes(t, "a", "b", "c")
	r := startRelay(t, stickyYAML(rep, ""), Options{StickyKey: stickyKeyForTests})
	v := core.StickyValue(stickyKeyForTests, DefaultPool, es["c"].url)
	for _, s := range sends {
		for _, cookie := range []string{"SRV=" + v, "a=1; SRV=" + v + "; b=2"} {
			got := s.send(t, r.addr, rawReq{target: "/", host: "example.com", header: [][2]string{{"Cookie", cookie}}})
			if b := who(t, got); b != "c" {
				t.Errorf("%s: the cookie of c went to %s", s.proto, b)
			}
			if seen := got.seen().Headers["Cookie"]; !slices.Equal(seen, []string{cookie}) {
				t.Errorf("%s: sent Cookie %q, the backend got %q", s.proto, cookie, seen)
			}
		}
	}
}

// startCacheBackend starts a backend that answers with the Cache-Control
// fields its request's X-Cache-Control fields ask for, one for each.
func startCacheBackend(t *testing.T) string {
	t.Helper()
	return serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Who", "cache")
		if cc := r.Header.Values("X-Cache-Control"); len(cc) > 0 {
			w.Header()["Cache-Control"] = cc
		}
	}))
}

// With nocache, a response that sets the sticky cookie is private:
// Cache-Control: private is added, or private merged into the backend's
// first Cache-Control field, unless the response already says private or
// no-store. A response that sets no cookie keeps the backend's
// Cache-Control as it was, or none. Without nocache, nothing is added.
func TestStickyNoCacheMarksResponsesThatSetTheCookie(t *testing.T) {
	be := startCacheBackend(t)
	yml := "backends: [" + be + "]\nsticky:\n  cookie: SRV\n"
	r := startRelay(t, yml+"  nocache: true\n", Options{StickyKey: stickyKeyForTests})
	plain := startRelay(t, yml, Options{StickyKey: stickyKeyForTests})
	v := core.StickyValue(stickyKeyForTests, DefaultPool, be)
	cases := []struct {
		backend []string // the backend's Cache-Control fields
		want    []string // with the cookie set
	}{
		{nil, []string{"private"}},
		{[]string{"max-age=60"}, []string{"max-age=60, private"}},
		{[]string{"public, max-age=60"}, []string{"public, max-age=60, private"}},
		{[]string{"max-age=60", "must-revalidate"}, []string{"max-age=60, private", "must-revalidate"}},
		{[]string{"private"}, []string{"private"}},
		{[]string{"max-age=0, Private"}, []string{"max-age=0, Private"}},
		{[]string{"no-store"}, []string{"no-store"}},
		{[]string{"max-age=60", "no-store"}, []string{"max-age=60", "no-store"}},
		{[]string{`no-cache="private, no-store"`}, []string{`no-cache="private, no-store", private`}},
		{[]string{`private="Set-Cookie"`}, []string{`private="Set-Cookie", private`}},
	}
	for _, s := range allSends(t, r) {
		for _, tc := range cases {
			rq := rawReq{target: "/", host: "example.com"}
			for _, cc := range tc.backend {
				rq.header = append(rq.header, [2]string{"X-Cache-Control", cc})
			}
			got := s.send(rq)
			if who(t, got); stickyCookie(t, got) != v {
				t.Fatalf("%s: no cookie set: %v", s.proto, &got)
			}
			if cc := got.header.Values("Cache-Control"); !slices.Equal(cc, tc.want) {
				t.Errorf("%s: backend's Cache-Control %q, the client got %q with the cookie, want %q", s.proto, tc.backend, cc, tc.want)
			}
			// The same response without a cookie set is left alone.
			rq.header = append(rq.header, [2]string{"Cookie", "SRV=" + v})
			got = s.send(rq)
			if stickyCookie(t, got) != "" {
				t.Fatalf("%s: a cookie set on a request with a valid one: %v", s.proto, &got)
			}
			if cc := got.header.Values("Cache-Control"); !slices.Equal(cc, tc.backend) {
				t.Errorf("%s: backend's Cache-Control %q, the client got %q with no cookie set, want it unchanged", s.proto, tc.backend, cc)
			}
		}
	}
	for _, s := range sends {
		got := s.send(t, plain.addr, rawReq{target: "/", host: "example.com", header: [][2]string{{"X-Cache-Control", "max-age=60"}}})
		if stickyCookie(t, got) != v {
			t.Fatalf("%s: no cookie set: %v", s.proto, &got)
		}
		if cc := got.header.Values("Cache-Control"); !slices.Equal(cc, []string{"max-age=60"}) {
			t.Errorf("%s, nocache off: the client got Cache-Control %q, want the backend's [max-age=60]", s.proto, cc)
		}
	}
}

// A reload turns indirect and nocache on and off for the next requests.
func TestStickyIndirectNoCacheThroughReloads(t *testing.T) {
	rep, es := echoes(t, "a", "b", "c")
	r := startRelay(t, stickyYAML(rep, ""), Options{StickyKey: stickyKeyForTests})
	v := core.StickyValue(stickyKeyForTests, DefaultPool, es["a"].url)
	check := func(when string, indirect, nocache bool) {
		t.Helper()
		got := sendH1(t, r.addr, rawReq{target: "/", host: "example.com", header: [][2]string{{"Cookie", "x=1; SRV=" + v}}})
		want := []string{"x=1; SRV=" + v}
		if indirect {
			want = []string{"x=1"}
		}
		if seen := got.seen().Headers["Cookie"]; !slices.Equal(seen, want) {
			t.Errorf("%s: the backend got Cookie %q, want %q", when, seen, want)
		}
		got = sendH1(t, r.addr, rawReq{target: "/", host: "example.com"})
		if cc := got.header.Get("Cache-Control"); stickyCookie(t, got) == "" || (cc == "private") != nocache {
			t.Errorf("%s: a response that set the cookie has Cache-Control %q (nocache %v)", when, cc, nocache)
		}
	}
	check("at start", false, false)
	for _, tc := range []struct {
		more              string
		indirect, nocache bool
	}{
		{"  indirect: true\n  nocache: true\n", true, true},
		{"  nocache: true\n", false, true},
		{"  indirect: true\n", true, false},
		{"", false, false},
	} {
		if err := r.plane.Reconfigure(parse(t, "h2c: true\n"+stickyYAML(rep, tc.more))); err != nil {
			t.Fatal(err)
		}
		check("after a reload to "+strings.ReplaceAll(strings.TrimSpace(tc.more), "\n ", ","), tc.indirect, tc.nocache)
	}
}
