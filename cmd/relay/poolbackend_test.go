package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// poolBackend is a backend that says who it is: every answer but the
// health check's is "POOL PORT GEN\n", POOL the pool it was made for, PORT
// its own port and GEN the X-Gen field a route set ("-" when none did),
// so a client can tell which pool and which route table a request went
// through. It counts its health checks and can be made to answer 500.
type poolBackend struct {
	pool, port, url string
	checks          atomic.Int64
	failing         atomic.Bool
}

func newPoolBackend(t *testing.T, pool string) *poolBackend {
	t.Helper()
	b := &poolBackend{pool: pool}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			b.checks.Add(1)
			w.Write([]byte("ok\n"))
			return
		}
		if b.failing.Load() {
			http.Error(w, "failing on purpose", http.StatusInternalServerError)
			return
		}
		gen := r.Header.Get("X-Gen")
		if gen == "" {
			gen = "-"
		}
		fmt.Fprintf(w, "%s %s %s\n", b.pool, b.port, gen)
	}))
	t.Cleanup(srv.Close)
	b.url = srv.URL
	_, b.port, _ = net.SplitHostPort(srv.Listener.Addr().String())
	return b
}

func newPoolBackends(t *testing.T, pool string, n int) []*poolBackend {
	t.Helper()
	bs := make([]*poolBackend, n)
	for i := range bs {
		bs[i] = newPoolBackend(t, pool)
	}
	return bs
}

// answer is a poolBackend's answer read back.
type answer struct{ pool, port, gen string }

func parseAnswer(body string) (answer, bool) {
	f := strings.Fields(body)
	if len(f) != 3 {
		return answer{}, false
	}
	return answer{f[0], f[1], f[2]}, true
}

// poolURLs is the flow-style list of bs's URLs, for backends: [...].
func poolURLs(bs ...*poolBackend) string {
	urls := make([]string, len(bs))
	for i, b := range bs {
		urls[i] = b.url
	}
	return "[" + strings.Join(urls, ", ") + "]"
}

// freshGet sends GET path to relay on a connection of its own, so that
// with several processes each request may land on any of them, and
// returns the status and the body.
func freshGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	return get(t, c, "http://"+addr+path)
}

// answersFrom sends n requests for path, each on its own connection, and
// counts the answers by backend port; any status but 200 fails t.
func answersFrom(t *testing.T, addr, path string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		code, body := freshGet(t, addr, path)
		a, ok := parseAnswer(body)
		if code != 200 || !ok {
			t.Fatalf("GET %s: %d %q", path, code, body)
		}
		got[a.port]++
	}
	return got
}

// poolMember is the member named url in pool, as GET /api/pools lists
// it, or nil.
func poolMember(t *testing.T, admin, pool, url string) map[string]any {
	t.Helper()
	code, v := adminCall(t, admin, "GET", "/api/pools", "")
	if code != 200 {
		t.Fatalf("GET /api/pools: %d %v", code, v)
	}
	pools, _ := v["pools"].([]any)
	for _, p := range pools {
		pm := p.(map[string]any)
		if pm["pool"] != pool {
			continue
		}
		bs, _ := pm["backends"].([]any)
		for _, b := range bs {
			if m := b.(map[string]any); m["name"] == url {
				return m
			}
		}
	}
	return nil
}
