package dataplane

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/core"
	"relay/internal/supervisor"
)

// stickyYAML is a pool of the echo backends a, b and c with sticky
// cookies called SRV; more is appended to the sticky section.
func stickyYAML(rep *strings.Replacer, more string) string {
	return rep.Replace("backends: [$a, $b, $c]\nsticky:\n  cookie: SRV\n" + more)
}

// stickyCookie returns the value of SRV that r sets, "" when it sets none.
func stickyCookie(t testing.TB, r reply) string {
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

// who is the backend that answered r, failing when relay answered.
func who(t testing.TB, r reply) string {
	t.Helper()
	if r.status != 200 || r.header.Get("X-Who") == "" {
		t.Fatalf("no backend answered: %v", &r)
	}
	return r.header.Get("X-Who")
}

func withCookie(v string) rawReq {
	return rawReq{target: "/", host: "example.com", header: [][2]string{{"Cookie", "other=1; SRV=" + v + "; more=2"}}}
}

// A client without a cookie gets one naming the backend that answered, with
// the attributes of the section (Secure only over TLS with secure: auto);
// with it, it comes back to that backend and gets no new cookie. Both
// front doors.
func TestStickyCookieSetAndHonoured(t *testing.T) {
	rep, _ := echoes(t, "a", "b", "c")
	r := startRelay(t, stickyYAML(rep, "  max_age: 1h\n"), Options{})
	for _, s := range sends {
		first := s.send(t, r.addr, rawReq{target: "/", host: "example.com"})
		v, b := stickyCookie(t, first), who(t, first)
		if want := "; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax"; v == "" || !strings.HasSuffix(first.header.Get("Set-Cookie"), v+want) {
			t.Fatalf("%s: Set-Cookie %q, want SRV=VALUE%s", s.proto, first.header.Get("Set-Cookie"), want)
		}
		for i := range 6 { // round robin would move it twice
			again := s.send(t, r.addr, withCookie(v))
			if got := who(t, again); got != b {
				t.Fatalf("%s: request %d with the cookie of %s went to %s", s.proto, i, b, got)
			}
			if sc := again.header.Get("Set-Cookie"); sc != "" {
				t.Fatalf("%s: request %d with a valid cookie got Set-Cookie %q", s.proto, i, sc)
			}
		}
	}
	dial := r.serveTLS(t)
	for _, proto := range []string{"http/1.1", "h2"} {
		var got reply
		if proto == "h2" {
			got = sendH2On(t, dial("www.example.com", proto), "https", rawReq{target: "/", host: "www.example.com"})
		} else {
			got = sendH1On(t, dial("www.example.com", proto), rawReq{target: "/", host: "www.example.com"})
		}
		if sc := got.header.Get("Set-Cookie"); !strings.HasSuffix(sc, "; Secure") {
			t.Errorf("over TLS (%s) Set-Cookie is %q, want Secure", proto, sc)
		}
	}
}

// 1,000 clients, each with the cookie its first answer set, stay on their
// backend across 10,000 requests over HTTP/1.1 and HTTP/2, within 60
// seconds.
func TestStickyThousandClientsStay(t *testing.T) {
	const clients, requests, workers = 1000, 10000, 16
	rep, _ := echoes(t, "a", "b", "c")
	r := startRelay(t, stickyYAML(rep, ""), Options{})
	tr := &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: ioTimeout}
	send := func(cookie string) (string, string, error) {
		req, _ := http.NewRequest("GET", "http://"+r.addr+"/", nil)
		if cookie != "" {
			req.Header.Set("Cookie", "SRV="+cookie)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", "", err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		set := ""
		for _, c := range resp.Cookies() {
			if c.Name == "SRV" {
				set = c.Value
			}
		}
		return resp.Header.Get("X-Who"), set, nil
	}
	cookies, owners := make([]string, clients), make([]string, clients)
	deadline := time.Now().Add(60 * time.Second)
	var (
		next, moved, renewed, h2sent atomic.Int64
		mu                           sync.Mutex
		failures                     []string
	)
	fail := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 10 {
			failures = append(failures, s)
		}
	}
	run := func(n int64) {
		c := int(n % clients)
		if n < clients { // each client's first request: no cookie yet
			b, v, err := send("")
			if err != nil || b == "" || v == "" {
				fail(fmt.Sprintf("client %d's first request: backend %q, cookie %q, %v", c, b, v, err))
			}
			cookies[c], owners[c] = v, b
			return
		}
		if n%50 == 0 { // some over HTTP/2
			h2sent.Add(1)
			got := sendH2(t, r.addr, withCookie(cookies[c]))
			if got.header.Get("X-Who") != owners[c] {
				moved.Add(1)
			}
			if got.header.Get("Set-Cookie") != "" {
				renewed.Add(1)
			}
			return
		}
		b, v, err := send(cookies[c])
		switch {
		case err != nil:
			fail(err.Error())
		case b != owners[c]:
			moved.Add(1)
		case v != "":
			renewed.Add(1)
		}
	}
	// The first requests of every client, then the rest.
	for _, upto := range []int64{clients, requests} {
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for time.Now().Before(deadline) {
					n := next.Add(1) - 1
					if n >= upto {
						next.Add(-1)
						return
					}
					run(n)
				}
			})
		}
		wg.Wait()
	}
	if len(failures) > 0 {
		t.Fatalf("failures: %q", failures)
	}
	if n := next.Load(); n < requests {
		t.Fatalf("only %d of %d requests within 60s", n, requests)
	}
	if moved.Load() != 0 || renewed.Load() != 0 {
		t.Errorf("of %d requests with a cookie (%d over HTTP/2), %d went to another backend and %d got a new cookie; want 0 and 0",
			requests-clients, h2sent.Load(), moved.Load(), renewed.Load())
	}
	spread := map[string]int{}
	for _, o := range owners {
		spread[o]++
	}
	if len(spread) != 3 {
		t.Errorf("the first requests went to %v, want round robin over a, b and c", spread)
	}
}

// A cookie the client changed, one made under another key, or a backend's
// name in clear is ignored: the algorithm picks, and the response sets the
// cookie of the backend that answered.
func TestStickyForgedCookieIgnored(t *testing.T) {
	rep, es := echoes(t, "a", "b", "c")
	key := []byte("0123456789abcdef0123456789abcdef")
	r := startRelay(t, stickyYAML(rep, ""), Options{StickyKey: key})
	valid := core.StickyValue(key, DefaultPool, es["a"].url)
	tampered := []byte(valid)
	tampered[3] ^= 1
	forged := map[string]string{
		"tampered": string(tampered),
		"foreign":  core.StickyValue([]byte("another relay's key, 32 bytes.."), DefaultPool, es["a"].url),
		"clear":    es["a"].url,
		"empty":    "",
		"too long": valid + valid,
	}
	for _, s := range sends {
		for name, v := range forged {
			// Round robin sends three requests to three backends; a
			// cookie honoured would send all three to a.
			whom := map[string]bool{}
			for range 3 {
				got := s.send(t, r.addr, withCookie(v))
				b := who(t, got)
				whom[b] = true
				if set := stickyCookie(t, got); set != core.StickyValue(key, DefaultPool, es[b].url) {
					t.Errorf("%s, %s cookie: answered by %s with cookie %q, want %s's", s.proto, name, b, set, b)
				}
			}
			if len(whom) != 3 {
				t.Errorf("%s, %s cookie: three requests went to %v, want the algorithm's three backends", s.proto, name, whom)
			}
		}
		if got := s.send(t, r.addr, withCookie(valid)); who(t, got) != "a" {
			t.Errorf("%s: the valid cookie of a went to %s", s.proto, who(t, got))
		}
	}
}

// memberOf returns the default pool's member for echo e.
func memberOf(t *testing.T, r *testRelay, e *echo) *backend.Backend {
	t.Helper()
	for _, b := range r.plane.Core().Pool(DefaultPool).Backends() {
		if b.Name == e.url {
			return b
		}
	}
	t.Fatalf("no member %s", e.url)
	return nil
}

// Disabling a backend, failing its checks, or removing it moves its sticky
// clients to another, with a new cookie; draining it keeps them, while new
// clients no longer go to it.
func TestStickyBackendOutMovesClientsDrainKeeps(t *testing.T) {
	rep, es := echoes(t, "a", "b", "c")
	key := []byte("0123456789abcdef")
	r := startRelay(t, stickyYAML(rep, ""), Options{StickyKey: key})
	a := core.StickyValue(key, DefaultPool, es["a"].url)
	mustMove := func(why string) {
		t.Helper()
		for _, s := range sends {
			got := s.send(t, r.addr, withCookie(a))
			b := who(t, got)
			if b == "a" {
				t.Fatalf("%s: %s, its sticky client still went to it", s.proto, why)
			}
			if set := stickyCookie(t, got); set != core.StickyValue(key, DefaultPool, es[b].url) {
				t.Errorf("%s: %s, its client went to %s with cookie %q, want %s's", s.proto, why, b, set, b)
			}
		}
	}
	ma := memberOf(t, r, es["a"])

	ma.SetDraining(true)
	for _, s := range sends {
		for range 3 {
			if got := s.send(t, r.addr, withCookie(a)); who(t, got) != "a" || got.header.Get("Set-Cookie") != "" {
				t.Fatalf("%s: a is draining; its sticky client got %v, want a and no new cookie", s.proto, &got)
			}
			if got := s.send(t, r.addr, rawReq{target: "/", host: "example.com"}); who(t, got) == "a" {
				t.Fatalf("%s: a is draining; a new client went to it", s.proto)
			}
		}
	}
	ma.SetDraining(false)

	ma.SetDisabled(true)
	mustMove("a is disabled")
	ma.SetDisabled(false)

	ma.SetHealthy(false)
	mustMove("a fails its checks")
	ma.SetHealthy(true)

	if _, err := r.plane.SetMembers([]supervisor.Member{
		{Pool: DefaultPool, URL: es["b"].url, Weight: 1}, {Pool: DefaultPool, URL: es["c"].url, Weight: 1},
	}); err != nil {
		t.Fatal(err)
	}
	mustMove("a left the pool")
}

// Two relays that share sticky.key honour each other's cookies; two that
// do not, do not.
func TestStickySharedKeyAcrossRelays(t *testing.T) {
	rep, _ := echoes(t, "a", "b", "c")
	shared := stickyYAML(rep, "  key: a-shared-secret-of-some-length\n")
	one, two := startRelay(t, shared, Options{}), startRelay(t, shared, Options{})
	alone := startRelay(t, stickyYAML(rep, ""), Options{})
	for _, s := range sends {
		for range 3 {
			first := s.send(t, one.addr, rawReq{target: "/", host: "example.com"})
			v, b := stickyCookie(t, first), who(t, first)
			for range 3 {
				if got := s.send(t, two.addr, withCookie(v)); who(t, got) != b || got.header.Get("Set-Cookie") != "" {
					t.Fatalf("%s: the other relay answered the cookie of %s with %v", s.proto, b, &got)
				}
			}
			if got := s.send(t, alone.addr, withCookie(v)); stickyCookie(t, got) == "" {
				t.Errorf("%s: a relay with its own key took the cookie of another: %v", s.proto, &got)
			}
		}
	}
}

// Requests that go where their cookie says do not move round robin's
// position: the requests without a cookie between them still take the
// backends in turn.
func TestStickyLeavesRoundRobinAlone(t *testing.T) {
	rep, es := echoes(t, "a", "b", "c")
	key := []byte("0123456789abcdef")
	r := startRelay(t, stickyYAML(rep, ""), Options{StickyKey: key})
	a := core.StickyValue(key, DefaultPool, es["a"].url)
	var order []string
	for range 9 {
		order = append(order, who(t, sendH1(t, r.addr, rawReq{target: "/", host: "example.com"})))
		for range 2 {
			sendH1(t, r.addr, withCookie(a))
		}
	}
	for i := 3; i <= len(order); i++ {
		if w := order[i-3 : i]; w[0] == w[1] || w[1] == w[2] || w[0] == w[2] {
			t.Fatalf("requests without a cookie went to %v; want a, b and c in turn", order)
		}
	}
}

// A member at its request cap does not take its sticky client, which goes
// to another backend with that one's cookie; once a place opens, the
// client's cookie takes it back.
func TestStickyMemberAtItsCapPassesTheClientOn(t *testing.T) {
	rep, es := echoes(t, "a", "b", "c")
	key := []byte("0123456789abcdef")
	r := startRelay(t, rep.Replace("backends:\n  - url: $a\n    max_requests: 1\n  - $b\n  - $c\nsticky:\n  cookie: SRV\n"), Options{StickyKey: key})
	a := core.StickyValue(key, DefaultPool, es["a"].url)
	ma := memberOf(t, r, es["a"])
	ma.Acquire() // a request in flight: a is at its cap
	for _, s := range sends {
		got := s.send(t, r.addr, withCookie(a))
		if b := who(t, got); b == "a" || stickyCookie(t, got) != core.StickyValue(key, DefaultPool, es[b].url) {
			t.Fatalf("%s: a is at its cap; its sticky client got %v, want another backend and its cookie", s.proto, &got)
		}
	}
	ma.Release()
	for _, s := range sends {
		// The client has the previous answer a moment before relay ends
		// that request and gives a's one place back.
		deadline := time.Now().Add(5 * time.Second)
		for ma.InFlight() != 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := s.send(t, r.addr, withCookie(a)); who(t, got) != "a" || got.header.Get("Set-Cookie") != "" {
			t.Fatalf("%s: a has room again; its sticky client got %v", s.proto, &got)
		}
	}
}

// A reload keeps the cookies valid (the key is the plane's for its life)
// and applies a changed sticky section: a new cookie name, then off.
func TestStickyThroughReloads(t *testing.T) {
	rep, _ := echoes(t, "a", "b", "c")
	r := startRelay(t, stickyYAML(rep, ""), Options{})
	first := sendH1(t, r.addr, rawReq{target: "/", host: "example.com"})
	v, b := stickyCookie(t, first), who(t, first)
	if err := r.plane.Reconfigure(parse(t, "h2c: true\nretries: 1\n"+stickyYAML(rep, "  max_age: 60\n"))); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if got := sendH1(t, r.addr, withCookie(v)); who(t, got) != b || got.header.Get("Set-Cookie") != "" {
			t.Fatalf("after a reload the cookie of %s got %v", b, &got)
		}
	}
	if err := r.plane.Reconfigure(parse(t, "h2c: true\n"+rep.Replace("backends: [$a, $b, $c]\nsticky:\n  cookie: LB\n"))); err != nil {
		t.Fatal(err)
	}
	if got := sendH1(t, r.addr, rawReq{target: "/", host: "example.com"}); !strings.HasPrefix(got.header.Get("Set-Cookie"), "LB=") {
		t.Errorf("after renaming the cookie the answer sets %q, want LB", got.header.Get("Set-Cookie"))
	}
	if err := r.plane.Reconfigure(parse(t, "h2c: true\n"+rep.Replace("backends: [$a, $b, $c]\n"))); err != nil {
		t.Fatal(err)
	}
	if got := sendH1(t, r.addr, rawReq{target: "/", host: "example.com"}); got.header.Get("Set-Cookie") != "" {
		t.Errorf("with sticky off the answer sets %q", got.header.Get("Set-Cookie"))
	}
}
