package core

import (
	"slices"
	"strings"
	"testing"
	"time"

	"relay/internal/backend"
)

// Sticky sessions (sticky.go): the pick by cookie and the cookie relay
// sets, through the fake door.

var stickyKey = []byte("0123456789abcdef0123456789abcdef")

// stickyPool is a round-robin pool over the backends a, b and c whose
// sticky cookie is SRV with the attributes s adds.
func stickyPool(t *testing.T, s Sticky) (*Core, *Pool, map[string]*testBackend) {
	t.Helper()
	s.Cookie, s.Key = "SRV", stickyKey
	pc := withSticky(testPool(), s)
	bs := map[string]*testBackend{"a": serving(t, "a", nil), "b": serving(t, "b", nil), "c": serving(t, "c", nil)}
	c, p := startPool(t, pc, bs["a"].b, bs["b"].b, bs["c"].b)
	return c, p, bs
}

// withSticky gives pc sticky sessions by s, the pool's side and the
// feature of its cookie, as the data plane does.
func withSticky(pc PoolConfig, s Sticky) PoolConfig {
	pc.Sticky = s
	pc.Features = append(slices.Clip(pc.Features), NewStickyCookies(s))
	return pc
}

// valueOf is the cookie value that names tb in the pool "test".
func valueOf(tb *testBackend) string { return StickyValue(stickyKey, "test", tb.b.Name) }

// withCookie is a request whose Cookie field carries SRV=v among others.
func withCookie(v string) req { return req{fields: "Cookie: other=1; SRV=" + v + "; more=2\r\n"} }

// setCookie returns the value of SRV that r sets, "" when it sets none.
func setCookie(t *testing.T, r reply) string {
	t.Helper()
	sc := r.header.Values("Set-Cookie")
	if len(sc) > 1 {
		t.Fatalf("%d Set-Cookie fields, want at most one: %q", len(sc), sc)
	}
	if len(sc) == 0 {
		return ""
	}
	v, ok := strings.CutPrefix(sc[0], "SRV=")
	if !ok {
		t.Fatalf("Set-Cookie %q does not set SRV", sc[0])
	}
	v, _, _ = strings.Cut(v, ";")
	return v
}

// whoAnswered is the backend that answered r, failing when relay did.
func whoAnswered(t *testing.T, r reply, bs map[string]*testBackend) *testBackend {
	t.Helper()
	if r.status != 200 || bs[r.backend] == nil {
		t.Fatalf("no backend answered: %d %q", r.status, r.body)
	}
	return bs[r.backend]
}

// A client without a cookie gets one naming the backend that answered,
// with the pool's attributes; with it, in whatever Cookie field and
// quoted or not, it comes back to that backend and gets no new cookie.
func TestStickyCookieSetAndHonoured(t *testing.T) {
	c, _, bs := stickyPool(t, Sticky{Path: "/", MaxAge: time.Hour, HTTPOnly: true, SameSite: "Lax"})
	first := do(c, req{})
	tb := whoAnswered(t, first, bs)
	v := valueOf(tb)
	if want := "SRV=" + v + "; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax"; first.header.Get("Set-Cookie") != want {
		t.Fatalf("Set-Cookie %q, want %q", first.header.Get("Set-Cookie"), want)
	}
	for i, r := range []req{
		withCookie(v), withCookie(v), withCookie(v), // round robin would move it twice
		{fields: "Cookie: SRV=" + v + "\r\n"},
		{fields: "Cookie: a=1\r\nCookie: b=2; SRV=" + v + "\r\n"},
		{fields: `Cookie: SRV="` + v + `"` + "\r\n"},
	} {
		got := do(c, r)
		if whoAnswered(t, got, bs) != tb {
			t.Fatalf("request %d with the cookie of %s went to %s", i, tb.b.Name, got.backend)
		}
		if sc := got.header.Get("Set-Cookie"); sc != "" {
			t.Fatalf("request %d with a valid cookie got Set-Cookie %q", i, sc)
		}
	}
}

// The cookie carries Secure on requests that came over TLS (the
// default), always, or never, as the pool says.
func TestStickySecure(t *testing.T) {
	for _, tc := range []struct {
		secure         StickySecure
		plain, overTLS bool
	}{
		{SecureOnTLS, false, true},
		{SecureAlways, true, true},
		{SecureNever, false, false},
	} {
		c, _, _ := stickyPool(t, Sticky{Secure: tc.secure})
		for _, tls := range []bool{false, true} {
			sc := do(c, req{tls: tls}).header.Get("Set-Cookie")
			if want := map[bool]bool{false: tc.plain, true: tc.overTLS}[tls]; strings.HasSuffix(sc, "; Secure") != want {
				t.Errorf("secure %d, over TLS %v: Set-Cookie %q, want Secure %v", tc.secure, tls, sc, want)
			}
		}
	}
}

// A cookie the client changed, one made under another key, or a backend's
// name in clear is ignored: the algorithm picks, and the response sets the
// cookie of the backend that answered.
func TestStickyForgedCookieIgnored(t *testing.T) {
	c, _, bs := stickyPool(t, Sticky{})
	valid := valueOf(bs["a"])
	tampered := []byte(valid)
	tampered[3] ^= 1
	for name, v := range map[string]string{
		"tampered": string(tampered),
		"foreign":  StickyValue([]byte("another relay's key, 32 bytes.."), "test", bs["a"].b.Name),
		"clear":    bs["a"].b.Name,
		"empty":    "",
		"too long": valid + valid,
	} {
		// Round robin sends three requests to three backends; a cookie
		// honoured would send all three to a.
		whom := map[*testBackend]bool{}
		for range 3 {
			got := do(c, withCookie(v))
			tb := whoAnswered(t, got, bs)
			whom[tb] = true
			if set := setCookie(t, got); set != valueOf(tb) {
				t.Errorf("%s cookie: answered by %s with cookie %q, want its own", name, got.backend, set)
			}
		}
		if len(whom) != 3 {
			t.Errorf("%s cookie: three requests went to %d backends, want the algorithm's three", name, len(whom))
		}
	}
	if got := do(c, withCookie(valid)); got.backend != "a" {
		t.Errorf("the valid cookie of a went to %s", got.backend)
	}
}

// Requests that go where their cookie says do not move round robin's
// position: the requests without a cookie between them still take the
// backends in turn.
func TestStickyLeavesRoundRobinAlone(t *testing.T) {
	c, _, bs := stickyPool(t, Sticky{})
	a := valueOf(bs["a"])
	var order []string
	for range 9 {
		order = append(order, whoAnswered(t, do(c, req{}), bs).b.Name)
		for range 2 {
			do(c, withCookie(a))
		}
	}
	for i := 3; i <= len(order); i++ {
		if w := order[i-3 : i]; w[0] == w[1] || w[1] == w[2] || w[0] == w[2] {
			t.Fatalf("requests without a cookie went to %v; want a, b and c in turn", order)
		}
	}
}

// Disabling a backend, failing its checks, opening its breaker or removing
// it moves its sticky clients to another, with a new cookie; draining it
// keeps them, while new clients no longer go to it.
func TestStickyBackendOutMovesClientsDrainKeeps(t *testing.T) {
	c, p, bs := stickyPool(t, Sticky{})
	a := bs["a"].b
	mustMove := func(why string) {
		t.Helper()
		got := do(c, withCookie(valueOf(bs["a"])))
		tb := whoAnswered(t, got, bs)
		if tb == bs["a"] {
			t.Fatalf("%s, its sticky client still went to it", why)
		}
		if set := setCookie(t, got); set != valueOf(tb) {
			t.Errorf("%s, its client went to %s with cookie %q, want its own", why, got.backend, set)
		}
	}

	a.SetDraining(true)
	for range 3 {
		if got := do(c, withCookie(valueOf(bs["a"]))); got.backend != "a" || got.header.Get("Set-Cookie") != "" {
			t.Fatalf("a is draining; its sticky client got %d from %q, Set-Cookie %q; want a and no new cookie",
				got.status, got.backend, got.header.Get("Set-Cookie"))
		}
		if got := do(c, req{}); got.backend == "a" {
			t.Fatal("a is draining; a new client went to it")
		}
	}
	a.SetDraining(false)

	a.SetDisabled(true)
	mustMove("a is disabled")
	a.SetDisabled(false)

	a.SetHealthy(false)
	mustMove("a fails its checks")
	a.SetHealthy(true)

	a.Eject(time.Now().Add(time.Hour))
	mustMove("a's breaker is open")
	a.Restore()

	p.SetBackends([]*backend.Backend{bs["b"].b, bs["c"].b})
	mustMove("a left the pool")
}

// A member at its request cap does not take its sticky client, which goes
// to another backend with that one's cookie; once a place opens, the
// client's cookie takes it back.
func TestStickyMemberAtItsCapPassesTheClientOn(t *testing.T) {
	c, _, bs := stickyPool(t, Sticky{})
	a := bs["a"].b
	a.SetMaxRequests(1)
	a.Acquire() // a request in flight: a is at its cap
	got := do(c, withCookie(valueOf(bs["a"])))
	if tb := whoAnswered(t, got, bs); tb == bs["a"] || setCookie(t, got) != valueOf(tb) {
		t.Fatalf("a is at its cap; its sticky client got %q with cookie %q, want another backend and its cookie", got.backend, setCookie(t, got))
	}
	a.Release()
	if got := do(c, withCookie(valueOf(bs["a"]))); got.backend != "a" || got.header.Get("Set-Cookie") != "" {
		t.Fatalf("a has room again; its sticky client got %q with Set-Cookie %q", got.backend, got.header.Get("Set-Cookie"))
	}
}
