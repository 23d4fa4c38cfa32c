package main

import (
	"io"
	"net/http"
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
