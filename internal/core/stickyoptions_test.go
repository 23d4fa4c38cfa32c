package core

import (
	"net/http"
	"slices"
	"testing"
)

// The options of sticky sessions (cookie.go): indirect keeps the cookie
// from the backends, nocache marks a response that sets it private.

// With indirect, the backend never sees the sticky cookie, valid or not,
// wherever it stands among the client's cookies and in however many
// Cookie fields; every other cookie reaches it byte for byte, in order,
// and a field whose only cookie was the sticky one is not sent. The
// cookie still does its work: the request goes to the backend it names.
func TestStickyIndirectKeepsTheCookieFromTheBackend(t *testing.T) {
	c, _, bs := stickyPool(t, Sticky{Indirect: true})
	v := valueOf(bs["b"])
	cases := []struct {
		name   string
		fields []string // the client's Cookie fields
		want   []string // the Cookie fields the backend gets
	}{
		{"only", []string{"SRV=" + v}, nil},
		{"first", []string{"SRV=" + v + "; theme=dark; lang=en"}, []string{"theme=dark; lang=en"}},
		{"middle", []string{"theme=dark; SRV=" + v + "; lang=en"}, []string{"theme=dark; lang=en"}},
		{"last", []string{"theme=dark;lang=en;SRV=" + v}, []string{"theme=dark;lang=en"}},
		{"quoted and odd values kept", []string{`q="a b"; SRV=` + v + `; e=; x=1=2`}, []string{`q="a b"; e=; x=1=2`}},
		{"similar names kept", []string{"SRVX=1; XSRV=2; srv=3; SRV=" + v}, []string{"SRVX=1; XSRV=2; srv=3"}},
		{"twice", []string{"SRV=" + v + "; theme=dark; SRV=" + v}, []string{"theme=dark"}},
		{"split fields", []string{"theme=dark", "SRV=" + v, "lang=en"}, []string{"theme=dark", "lang=en"}},
		{"split, only the sticky one", []string{"SRV=" + v, "SRV=" + v}, nil},
	}
	for _, tc := range cases {
		var r req
		for _, f := range tc.fields {
			r.fields += "Cookie: " + f + "\r\n"
		}
		if got := do(c, r); got.backend != "b" {
			t.Errorf("%s: the cookie of b went to %q", tc.name, got.backend)
		}
		if seen := bs["b"].last().Header["Cookie"]; !slices.Equal(seen, tc.want) {
			t.Errorf("%s: sent Cookie %q, the backend got %q, want %q", tc.name, tc.fields, seen, tc.want)
		}
	}
	// A cookie that names no member is removed too, and replaced.
	tampered := []byte(v)
	tampered[0] ^= 1
	got := do(c, req{fields: "Cookie: a=1; SRV=" + string(tampered) + "; b=2\r\n"})
	tb := whoAnswered(t, got, bs)
	if seen := tb.last().Header["Cookie"]; !slices.Equal(seen, []string{"a=1; b=2"}) {
		t.Errorf("tampered cookie: the backend got Cookie %q, want [a=1; b=2]", seen)
	}
	if setCookie(t, got) != valueOf(tb) {
		t.Errorf("tampered cookie: Set-Cookie %q, want the answering backend's", got.header.Get("Set-Cookie"))
	}
	// Cookies without the sticky one go on exactly as they came.
	tb = whoAnswered(t, do(c, req{fields: "Cookie: a=1;b=2;  c=3\r\n"}), bs)
	if seen := tb.last().Header["Cookie"]; !slices.Equal(seen, []string{"a=1;b=2;  c=3"}) {
		t.Errorf("no sticky cookie: the backend got Cookie %q, want [a=1;b=2;  c=3]", seen)
	}
}

// Without indirect (the default), the backend gets the sticky cookie as
// the client sent it.
func TestStickyDirectPassesTheCookieOn(t *testing.T) {
	c, _, bs := stickyPool(t, Sticky{})
	v := valueOf(bs["c"])
	for _, cookie := range []string{"SRV=" + v, "a=1; SRV=" + v + "; b=2"} {
		if got := do(c, req{fields: "Cookie: " + cookie + "\r\n"}); got.backend != "c" {
			t.Errorf("the cookie of c went to %q", got.backend)
		}
		if seen := bs["c"].last().Header["Cookie"]; !slices.Equal(seen, []string{cookie}) {
			t.Errorf("sent Cookie %q, the backend got %q", cookie, seen)
		}
	}
}

// cacheBackend answers with the Cache-Control fields its request's
// X-Cache-Control fields ask for, one for each.
func cacheBackend(t *testing.T) *testBackend {
	return serving(t, "cache", func(w http.ResponseWriter, r *http.Request) {
		if cc := r.Header.Values("X-Cache-Control"); len(cc) > 0 {
			w.Header()["Cache-Control"] = cc
		}
	})
}

// With nocache, a response that sets the sticky cookie is private:
// Cache-Control: private is added, or private merged into the backend's
// first Cache-Control field, unless the response already says private or
// no-store. A response that sets no cookie keeps the backend's
// Cache-Control as it was, or none. Without nocache, nothing is added.
func TestStickyNoCacheMarksResponsesThatSetTheCookie(t *testing.T) {
	tb := cacheBackend(t)
	s := Sticky{Cookie: "SRV", Key: stickyKey, NoCache: true}
	c, _ := startPool(t, withSticky(testPool(), s), tb.b)
	s.NoCache = false
	other := cacheBackend(t)
	plain, _ := startPool(t, withSticky(testPool(), s), other.b)
	v := valueOf(tb)
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
	for _, tc := range cases {
		var r req
		for _, cc := range tc.backend {
			r.fields += "X-Cache-Control: " + cc + "\r\n"
		}
		got := do(c, r)
		if setCookie(t, got) != v {
			t.Fatalf("no cookie set: %d %q", got.status, got.header)
		}
		if cc := got.header.Values("Cache-Control"); !slices.Equal(cc, tc.want) {
			t.Errorf("backend's Cache-Control %q, the client got %q with the cookie, want %q", tc.backend, cc, tc.want)
		}
		// The same response without a cookie set is left alone.
		r.fields += "Cookie: SRV=" + v + "\r\n"
		got = do(c, r)
		if setCookie(t, got) != "" {
			t.Fatalf("a cookie set on a request with a valid one: %q", got.header)
		}
		if cc := got.header.Values("Cache-Control"); !slices.Equal(cc, tc.backend) {
			t.Errorf("backend's Cache-Control %q, the client got %q with no cookie set, want it unchanged", tc.backend, cc)
		}
	}
	got := do(plain, req{fields: "X-Cache-Control: max-age=60\r\n"})
	if setCookie(t, got) != valueOf(other) {
		t.Fatalf("no cookie set: %q", got.header)
	}
	if cc := got.header.Values("Cache-Control"); !slices.Equal(cc, []string{"max-age=60"}) {
		t.Errorf("nocache off: the client got Cache-Control %q, want the backend's [max-age=60]", cc)
	}
}
