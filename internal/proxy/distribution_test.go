package proxy

import (
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/core"
)

// sequence sends n sequential GETs on c and returns the backends that
// answered, one letter each.
func sequence(t *testing.T, c *http.Client, url string, n int) string {
	t.Helper()
	var sb strings.Builder
	for i := 0; i < n; i++ {
		r := get(t, c, url)
		if r.status != 200 {
			t.Fatalf("request %d: status %d, body %q", i, r.status, r.body)
		}
		sb.WriteString(r.backend)
	}
	return sb.String()
}

func TestDistributionSequential(t *testing.T) {
	tests := []struct {
		name      string
		algorithm string
		weights   []int
		want      string
	}{
		{"round-robin cycles in order", "round-robin", []int{1, 1, 1}, "abcabcabcabc"},
		{"round-robin ignores weights", "roundrobin", []int{5, 1, 1}, "abcabc"},
		{"weighted-round-robin is smooth", "weighted-round-robin", []int{5, 1, 1}, "aabacaa" + "aabacaa"},
		{"weighted-round-robin 2:1", "weighted-round-robin", []int{2, 1}, "abaaba"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hbs []*httpBackend
			for i, w := range tt.weights {
				hbs = append(hbs, newHTTPBackend(t, string(rune('a'+i)), w, nil))
			}
			r := startRelay(t, Config{Pool: core.PoolConfig{Algorithm: tt.algorithm}}, backendsOf(hbs...)...)
			if got := sequence(t, newClient(t, 1, ""), r.url+"/", len(tt.want)); got != tt.want {
				t.Errorf("backends in order = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRandomNeverPicksBackendOutOfRotation(t *testing.T) {
	a := newHTTPBackend(t, "a", 1, nil)
	b := newHTTPBackend(t, "b", 1, nil)
	c := newHTTPBackend(t, "c", 1, nil)
	r := startRelay(t, Config{Pool: core.PoolConfig{Algorithm: "random"}}, backendsOf(a, b, c)...)
	b.b.SetHealthy(false)
	got := sequence(t, newClient(t, 1, ""), r.url+"/", 60)
	if strings.Contains(got, "b") {
		t.Errorf("random picked the backend out of rotation: %q", got)
	}
	// Two backends left: 60 uniform picks all landing on one has
	// probability 2^-59.
	if !strings.Contains(got, "a") || !strings.Contains(got, "c") {
		t.Errorf("random did not spread over the available backends: %q", got)
	}
}

// TestLoadAwareAlgorithmsAvoidSlowBackend runs 20 concurrent clients against
// one backend that takes 50 ms per request and two that answer at once: the
// load-aware pickers see the slow backend's requests pile up in flight and
// send it clearly less than its third; round-robin is the control that
// gives it exactly a third. Afterwards no request may still be counted in
// flight, or least-conn and p2c would shun that backend forever.
func TestLoadAwareAlgorithmsAvoidSlowBackend(t *testing.T) {
	const clients, perClient = 20, 15
	tests := []struct {
		name      string
		algorithm string
		maxShare  float64 // the slow backend's largest acceptable share
		minShare  float64
	}{
		{"least-conn", "least-conn", 0.2, 0},
		{"p2c", "p2c", 0.2, 0},
		{"round-robin control", "round-robin", 0.34, 0.32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slow := newHTTPBackend(t, "s", 1, func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(50 * time.Millisecond)
			})
			f1 := newHTTPBackend(t, "f", 1, nil)
			f2 := newHTTPBackend(t, "g", 1, nil)
			r := startRelay(t, Config{Pool: core.PoolConfig{Algorithm: tt.algorithm}}, backendsOf(slow, f1, f2)...)
			c := newClient(t, clients, "")
			var wg sync.WaitGroup
			failed := make(chan string, clients*perClient)
			for i := 0; i < clients; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < perClient; j++ {
						resp, err := c.Get(r.url + "/")
						if err != nil {
							failed <- err.Error()
							return
						}
						resp.Body.Close()
						if resp.StatusCode != 200 {
							failed <- resp.Status
						}
					}
				}()
			}
			wg.Wait()
			close(failed)
			for f := range failed {
				t.Errorf("request failed: %s", f)
			}
			total := slow.hits.Load() + f1.hits.Load() + f2.hits.Load()
			if total != clients*perClient {
				t.Fatalf("backends saw %d requests, want %d", total, clients*perClient)
			}
			share := float64(slow.hits.Load()) / float64(total)
			t.Logf("slow backend share %.3f (%d of %d)", share, slow.hits.Load(), total)
			if share > tt.maxShare || share < tt.minShare {
				t.Errorf("slow backend got %.3f of the traffic, want between %.2f and %.2f", share, tt.minShare, tt.maxShare)
			}
			expectNoneInFlight(t, r)
		})
	}
}

// TestIPHashKeepsClientOnBackend connects from different loopback addresses:
// relay sees each as its own client IP.
func TestIPHashKeepsClientOnBackend(t *testing.T) {
	hbs := []*httpBackend{newHTTPBackend(t, "a", 1, nil), newHTTPBackend(t, "b", 1, nil), newHTTPBackend(t, "c", 1, nil)}
	r := startRelay(t, Config{Pool: core.PoolConfig{Algorithm: "ip-hash"}}, backendsOf(hbs...)...)
	used := map[string]bool{}
	for i := 2; i < 22; i++ {
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}).String()
		got := sequence(t, newClient(t, 1, ip), r.url+"/", 4)
		if strings.Count(got, got[:1]) != len(got) {
			t.Errorf("client %s moved between backends: %q", ip, got)
		}
		used[got[:1]] = true
	}
	// 20 addresses on one of three backends: probability 3^-19.
	if len(used) < 2 {
		t.Errorf("20 client addresses all hashed to one backend")
	}
}

// TestIPHashUsesForwardedForOnlyFromTrustedPeers: an untrusted client cannot
// pick its backend by forging X-Forwarded-For, while behind a trusted proxy
// the forwarded address is the client.
func TestIPHashUsesForwardedForOnlyFromTrustedPeers(t *testing.T) {
	tests := []struct {
		name    string
		trusted []netip.Prefix
		spread  bool // distinct X-Forwarded-For values reach distinct backends
	}{
		{"untrusted peer", nil, false},
		{"trusted peer", []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hbs := []*httpBackend{newHTTPBackend(t, "a", 1, nil), newHTTPBackend(t, "b", 1, nil), newHTTPBackend(t, "c", 1, nil)}
			r := startRelay(t, Config{Pool: core.PoolConfig{Algorithm: "ip-hash"}, TrustedProxies: tt.trusted}, backendsOf(hbs...)...)
			c := newClient(t, 1, "")
			used := map[string]bool{}
			for i := 1; i <= 20; i++ {
				xff := netip.AddrFrom4([4]byte{10, 1, 2, byte(i)}).String()
				var first string
				for j := 0; j < 3; j++ {
					req, _ := http.NewRequest("GET", r.url+"/", nil)
					req.Header.Set("X-Forwarded-For", xff)
					res := do(t, c, req)
					if j == 0 {
						first = res.backend
					} else if res.backend != first {
						t.Errorf("X-Forwarded-For %s moved from %s to %s", xff, first, res.backend)
					}
				}
				used[first] = true
			}
			if spread := len(used) > 1; spread != tt.spread {
				t.Errorf("20 forwarded addresses reached %d backends; want spread %v", len(used), tt.spread)
			}
		})
	}
}

// TestIPHashRetrySpreadsAFailedBackendsClients: when a backend fails while
// still in rotation, each of its clients is retried on that client's next
// choice, so they spread over the other backends (as with Maglev's fallback
// order) instead of all landing on one, and clients of other backends do
// not move.
func TestIPHashRetrySpreadsAFailedBackendsClients(t *testing.T) {
	var failing atomic.Bool
	a := newHTTPBackend(t, "a", 1, func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			// Drop the connection before any response byte: a GET is
			// retried on another backend.
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		io.WriteString(w, "a")
	})
	hbs := []*httpBackend{a, newHTTPBackend(t, "b", 1, nil), newHTTPBackend(t, "c", 1, nil), newHTTPBackend(t, "d", 1, nil)}
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	r := startRelay(t, Config{Pool: core.PoolConfig{Algorithm: "ip-hash"}, TrustedProxies: trusted}, backendsOf(hbs...)...)
	c := newClient(t, 4, "")
	ask := func(i int) result {
		req, _ := http.NewRequest("GET", r.url+"/", nil)
		req.Header.Set("X-Forwarded-For", netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}).String())
		return do(t, c, req)
	}
	const clients = 400
	before := make([]string, clients)
	for i := range clients {
		before[i] = ask(i).backend
	}
	failing.Store(true)
	moved := map[string]int{}
	for i := range clients {
		res := ask(i)
		if res.status != 200 {
			t.Fatalf("client %d: status %d, want 200 from a retry", i, res.status)
		}
		switch {
		case before[i] != "a" && res.backend != before[i]:
			t.Errorf("client %d moved from %s to %s although %s did not fail", i, before[i], res.backend, before[i])
		case before[i] == "a":
			if res.backend == "a" {
				t.Fatalf("client %d was answered by the failing backend", i)
			}
			moved[res.backend]++
			if again := ask(i).backend; again != res.backend {
				t.Errorf("client %d fell back to %s, then to %s: its next choice must be stable", i, res.backend, again)
			}
		}
	}
	t.Logf("a's clients after it failed: %v", moved)
	n := moved["b"] + moved["c"] + moved["d"]
	if n < 50 {
		t.Fatalf("only %d of %d clients were on a; the test needs more", n, clients)
	}
	for _, name := range []string{"b", "c", "d"} {
		if moved[name] < n/8 {
			t.Errorf("%s took %d of a's %d clients; want them spread over b, c and d", name, moved[name], n)
		}
	}
}
