package dataplane

import (
	"net"
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

// With indirect, the backend never sees the sticky cookie in the Cookie
// fields each front door hands the core, in clear text and over TLS: one
// field, or HTTP/2's split ones, which arrive joined; the other cookies
// reach it in order, a request whose only cookie was the sticky one
// reaches it with no Cookie field, and the request goes to the backend
// the cookie names. What indirect does with every shape of Cookie field
// is tested in internal/core.
func TestStickyIndirectOverEveryDoor(t *testing.T) {
	rep, es := echoes(t, "a", "b", "c")
	r := startRelay(t, stickyYAML(rep, "  indirect: true\n"), Options{StickyKey: stickyKeyForTests})
	v := core.StickyValue(stickyKeyForTests, DefaultPool, es["b"].url)
	cases := []struct {
		name   string
		fields []string // the client's Cookie fields
		want   []string // the Cookie fields the backend gets
		h2want []string // over HTTP/2, when it differs: split fields arrive joined
	}{
		{"only", []string{"SRV=" + v}, nil, nil},
		{"middle", []string{"theme=dark; SRV=" + v + "; lang=en"}, []string{"theme=dark; lang=en"}, nil},
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
