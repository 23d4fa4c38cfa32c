package dataplane

import (
	"fmt"
	"testing"
)

// hashBackends are the ip-hash pools' members in the hash key tests.
var hashBackends = []string{"h1", "h2", "h3", "h4"}

// startHashRelay serves one ip-hash pool over hashBackends with hash_key
// key, trusting 127.0.0.1 as a proxy so that X-Forwarded-For names the
// client.
func startHashRelay(t *testing.T, rep interface{ Replace(string) string }, key string) *testRelay {
	t.Helper()
	return startRelay(t, rep.Replace(fmt.Sprintf(`
algorithm: ip-hash
hash_key: %q
trusted_proxies: [127.0.0.1/32]
backends: [$h1, $h2, $h3, $h4]
`, key)), Options{})
}

// answeredBy sends rq and returns the backend that answered it.
func answeredBy(t *testing.T, send func(testing.TB, string, rawReq) reply, addr string, rq rawReq) string {
	t.Helper()
	got := send(t, addr, rq)
	s := got.seen()
	if got.status != 200 || s == nil {
		t.Fatalf("%q %v: got %v, want a backend's 200", rq.target, rq.header, &got)
	}
	return s.Who
}

// TestHashKeys: under each hash_key, the same value reaches the same
// backend every time, over HTTP/1.1 and HTTP/2 alike; different values
// spread over the backends; and what else the request carries (other
// clients, other cookies and query parameters) does not matter.
func TestHashKeys(t *testing.T) {
	rep, _ := echoes(t, hashBackends...)
	tests := []struct {
		key string
		// request makes a request carrying value v for the key, from
		// client number c.
		request func(v string, c int) rawReq
	}{
		{"header:X-User", func(v string, c int) rawReq {
			return rawReq{target: "/", host: "h", header: [][2]string{{"X-Forwarded-For", client(c)}, {"x-user", v}}}
		}},
		{"cookie:session", func(v string, c int) rawReq {
			// Two Cookie fields, as HTTP/2 clients split them.
			return rawReq{target: "/", host: "h", header: [][2]string{{"X-Forwarded-For", client(c)},
				{"Cookie", fmt.Sprintf("theme=c%d; sessionx=1", c)}, {"Cookie", "lang=en; session=" + v}}}
		}},
		{"query:user", func(v string, c int) rawReq {
			return rawReq{target: fmt.Sprintf("/a?users=%d&user=%s&x=%d", c, v, c), host: "h", header: [][2]string{{"X-Forwarded-For", client(c)}}}
		}},
		{"path", func(v string, c int) rawReq {
			return rawReq{target: fmt.Sprintf("/p/%s?c=%d", v, c), host: "h", header: [][2]string{{"X-Forwarded-For", client(c)}}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			r := startHashRelay(t, rep, tt.key)
			spread := map[string]int{}
			for i := range 24 {
				v := fmt.Sprintf("value-%d", i)
				first := ""
				for c := range 4 {
					s := sends[c%2]
					b := answeredBy(t, s.send, r.addr, tt.request(v, i*4+c))
					if first == "" {
						first = b
					} else if b != first {
						t.Fatalf("%s %q went to %s, then to %s over %s from another client", tt.key, v, first, b, s.proto)
					}
				}
				spread[first]++
			}
			if len(spread) < 3 {
				t.Errorf("24 values reached only %v; want them spread over at least 3 of 4 backends", spread)
			}
		})
	}
}

// TestHashKeyMissing: a request without the key, or with it empty, is
// hashed by its client address: it reaches the backend hash_key: client
// sends that client to, over both doors, so clients without the key still
// spread and each stays on one backend.
func TestHashKeyMissing(t *testing.T) {
	rep, _ := echoes(t, hashBackends...)
	byClient := startHashRelay(t, rep, "client")
	tests := []struct {
		key   string
		extra [][2]string // a key present but empty, or none
	}{
		{"header:X-User", nil},
		{"header:X-User", [][2]string{{"X-User", ""}}},
		{"cookie:session", [][2]string{{"Cookie", "other=1; session="}}},
		{"query:user", nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.key, tt.extra), func(t *testing.T) {
			r := startHashRelay(t, rep, tt.key)
			spread := map[string]int{}
			for c := range 24 {
				h := append([][2]string{{"X-Forwarded-For", client(c)}}, tt.extra...)
				rq := rawReq{target: "/a?other=1&user=", host: "h", header: h}
				want := answeredBy(t, sendH1, byClient.addr, rq)
				for _, s := range sends {
					if got := answeredBy(t, s.send, r.addr, rq); got != want {
						t.Fatalf("client %s without %s reached %s over %s; hashed by its address it goes to %s", client(c), tt.key, got, s.proto, want)
					}
				}
				spread[want]++
			}
			if len(spread) < 3 {
				t.Errorf("24 clients without the key reached only %v; want them spread over at least 3 of 4 backends", spread)
			}
		})
	}
}

// client is the address of test client c, as X-Forwarded-For gives it.
func client(c int) string { return fmt.Sprintf("192.0.2.%d", c%250+1) }
