package dataplane

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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

// A POST whose held body (below body_buffer_bytes) arrives after its head
// must still go to the backend its sticky cookie names: the affinity read
// at the admit phase must not alias the door's buffer the body is then read
// into.
func TestStickyCookieSurvivesAHeldBody(t *testing.T) {
	rep, _ := echoes(t, "a", "b", "c")
	r := startRelay(t, stickyYAML(rep, ""), Options{})
	first := sendH1(t, r.addr, rawReq{target: "/", host: "example.com"})
	v, b := stickyCookie(t, first), who(t, first)
	body := strings.Repeat("x", 4000)
	for i := range 6 {
		nc := dialTCP(t, r.addr)
		fmt.Fprintf(nc, "POST / HTTP/1.1\r\nHost: example.com\r\nCookie: SRV=%s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", v, len(body))
		time.Sleep(20 * time.Millisecond) // the head is read on its own
		io.WriteString(nc, body)
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		nc.Close()
		if got := resp.Header.Get("X-Who"); got != b || resp.Header.Get("Set-Cookie") != "" {
			t.Fatalf("request %d with the cookie of %s went to %q, Set-Cookie %q", i, b, got, resp.Header.Get("Set-Cookie"))
		}
	}
}
