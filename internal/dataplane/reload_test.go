package dataplane

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/supervisor"
)

// reloadGen is one generation of the reload test's configuration: which
// pools exist, where each path's route sends, and whether there is a
// default pool. Generation k cycles through adding and removing pools c and
// d, swapping the routes of /a and /b, and dropping the default pool.
type reloadGen struct {
	pools   []string          // named pools, file order
	routes  map[string]string // path prefix -> pool
	deflt   bool              // the top level has a backend
	members []supervisor.Member
}

var reloadPaths = []string{"/a", "/b", "/c", "/d", "/z"}

func genOf(k int, urls map[string]*echo) reloadGen {
	g := reloadGen{pools: []string{"a", "b"}, routes: map[string]string{"/a": "a", "/b": "b"}, deflt: k%2 == 0}
	if k%3 != 2 {
		g.pools = append(g.pools, "c")
		g.routes["/c"] = "c"
	}
	if k%2 == 1 {
		g.pools = append(g.pools, "d")
		g.routes["/d"] = "d"
	}
	if k%4 == 3 {
		g.routes["/a"], g.routes["/b"] = "b", "a"
	}
	if g.deflt {
		g.members = append(g.members, supervisor.Member{Pool: DefaultPool, URL: urls["default"].url, Weight: 1})
	}
	for _, p := range g.pools {
		g.members = append(g.members, supervisor.Member{Pool: p, URL: urls[p].url, Weight: 1})
	}
	return g
}

func (g reloadGen) yaml(urls map[string]*echo) string {
	var b strings.Builder
	if g.deflt {
		fmt.Fprintf(&b, "backends: [%s]\n", urls["default"].url)
	}
	b.WriteString("pools:\n")
	for _, p := range g.pools {
		fmt.Fprintf(&b, "  %s: {backends: [%s]}\n", p, urls[p].url)
	}
	b.WriteString("routes:\n")
	for _, path := range reloadPaths {
		if p, ok := g.routes[path]; ok {
			fmt.Fprintf(&b, "  - match: {path_prefix: %s}\n    pool: %s\n", path, p)
		}
	}
	return b.String()
}

// want is the status and the pool whose backend answers path under g
// ("" for relay's 404).
func (g reloadGen) want(path string) (int, string) {
	if p, ok := g.routes[path]; ok {
		return 200, p
	}
	if g.deflt {
		return 200, "default"
	}
	return 404, ""
}

// Fifty clients, forty over HTTP/1.1 and ten over h2c, send requests while
// the configuration is reloaded 20 times: pools are added and removed, the
// default pool comes and goes and routes change. Each reload is applied as
// relay applies one (Reconfigure, then the control's membership through
// SetMembers). No request fails, and every one is answered as some
// generation in force while it was in flight routes it: a request that
// crosses a swap may be routed by the old or the new table.
func TestReloadUnderLoad(t *testing.T) {
	const (
		clients, h2clients = 50, 10
		reloads            = 20
		maxPerClient       = 5000
	)
	_, urls := echoes(t, "default", "a", "b", "c", "d")
	gens := make([]reloadGen, reloads+1)
	for k := range gens {
		gens[k] = genOf(k, urls)
	}
	r := startRelay(t, gens[0].yaml(urls), Options{})

	// started is the newest generation being applied, done the newest
	// applied: a request that saw done = lo before it was sent and started
	// = hi after its answer was routed by a generation in [lo, hi].
	var started, done atomic.Int64
	stop := make(chan struct{})
	var (
		mu       sync.Mutex
		failures []string
		total    atomic.Int64
		crossed  atomic.Int64
		byPool   = map[string]int{}
	)
	fail := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		if len(failures) < 20 {
			failures = append(failures, s)
		}
	}
	h1 := &http.Transport{MaxIdleConnsPerHost: clients, DisableCompression: true}
	defer h1.CloseIdleConnections()
	var wg sync.WaitGroup
	for i := range clients {
		client := &http.Client{Transport: h1, Timeout: ioTimeout}
		proto := "HTTP/1.1"
		if i < h2clients {
			tr := h2cTransport()
			defer tr.CloseIdleConnections()
			client, proto = &http.Client{Transport: tr, Timeout: ioTimeout}, "HTTP/2"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < maxPerClient; n++ {
				select {
				case <-stop:
					return
				default:
				}
				path := reloadPaths[(i+n)%len(reloadPaths)]
				lo := done.Load()
				status, who, err := get(client, "http://"+r.addr+path+"/x")
				hi := started.Load()
				total.Add(1)
				if err != nil {
					fail(fmt.Sprintf("%s %s (generations %d-%d): %v", proto, path, lo, hi, err))
					continue
				}
				if lo != hi {
					crossed.Add(1)
				}
				ok := false
				var wants []string
				for k := lo; k <= hi; k++ {
					ws, wp := gens[k].want(path)
					ok = ok || ws == status && wp == who
					wants = append(wants, fmt.Sprintf("%d %q", ws, wp))
				}
				if !ok {
					fail(fmt.Sprintf("%s %s (generations %d-%d): %d from %q, want one of %v", proto, path, lo, hi, status, who, wants))
				}
				mu.Lock()
				byPool[who]++
				mu.Unlock()
			}
		}()
	}

	// Reload every 100ms while the clients run; the pace only spreads the
	// reloads over the load, nothing waits on it.
	for k := 1; k <= reloads; k++ {
		time.Sleep(100 * time.Millisecond)
		started.Store(int64(k))
		cfg := parse(t, "h2c: true\n"+gens[k].yaml(urls))
		if err := r.plane.Reconfigure(cfg); err != nil {
			t.Fatalf("reload %d: %v", k, err)
		}
		if _, err := r.plane.SetMembers(gens[k].members); err != nil {
			t.Fatalf("reload %d: membership: %v", k, err)
		}
		done.Store(int64(k))
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()

	t.Logf("%d requests, %d across a reload; answered by %v", total.Load(), crossed.Load(), byPool)
	if len(failures) > 0 {
		t.Errorf("%d+ requests failed or reached the wrong pool:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	if total.Load() < int64(clients) {
		t.Errorf("only %d requests were sent", total.Load())
	}
}

// get sends a GET and returns the status and the pool of the backend that
// answered ("" when relay answered itself).
func get(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	if resp.Header.Get("X-Who") == "" {
		return resp.StatusCode, "", nil
	}
	var s seen
	if err := json.Unmarshal(body, &s); err != nil {
		return 0, "", fmt.Errorf("backend answer %q: %w", body, err)
	}
	return resp.StatusCode, s.Who, nil
}

// A reload that removes a pool fails none of the requests that took its
// route just before the routes were swapped: 50 clients send 2,000
// requests (within 5 seconds) to a route that reloads in a row remove and
// bring back, and every request is answered by the pool's backend or, once
// the route is gone, the default pool's.
func TestReloadRemovingAPoolFailsNoRequest(t *testing.T) {
	const clients, requests = 50, 2000
	rep, _ := echoes(t, "default", "c")
	with := rep.Replace("backends: [$default]\npools:\n  c: {backends: [$c]}\nroutes:\n  - match: {path_prefix: /c}\n    pool: c\n")
	without := rep.Replace("backends: [$default]\n")
	r := startRelay(t, with, Options{})
	cfgs := []*config.Config{parse(t, "h2c: true\n"+without), parse(t, "h2c: true\n"+with)}

	stop := make(chan struct{})
	var total atomic.Int64
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Transport: tr, Timeout: ioTimeout}
			for n := 0; n < 10000; n++ {
				select {
				case <-stop:
					return
				default:
				}
				status, who, err := get(c, "http://"+r.addr+"/c/x")
				total.Add(1)
				if err != nil || status != 200 || who != "c" && who != "default" {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%d from %q, %v", status, who, err))
					mu.Unlock()
				}
			}
		}()
	}
	start := time.Now()
	k := 0
	for ; total.Load() < requests && time.Since(start) < 5*time.Second; k++ {
		if err := r.plane.Reconfigure(cfgs[k%2]); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests across %d reloads failed, e.g. %s", len(failures), total.Load(), k, failures[0])
	}
}

// A pool a reload adds serves the backends the file gives it from the
// moment its route is in force, before the control's membership arrives;
// the membership then keeps those backends, with their state.
func TestReloadAddedPoolServesBeforeMembership(t *testing.T) {
	rep, urls := echoes(t, "default", "d")
	r := startRelay(t, rep.Replace("backends: [$default]\n"), Options{})
	next := parse(t, rep.Replace("h2c: true\nbackends: [$default]\npools:\n  d: {backends: [$d]}\nroutes:\n  - match: {path_prefix: /d}\n    pool: d\n"))
	if err := r.plane.Reconfigure(next); err != nil {
		t.Fatal(err)
	}
	rq := rawReq{target: "/d/x", host: "example.com"}
	for _, s := range sends {
		checkCase(t, routeCase{rq: rq, status: 200, pool: "d", target: "/d/x"}, s.send(t, r.addr, rq))
	}
	before := r.plane.Core().Pool("d").Backends()
	got, err := r.plane.SetMembers([]supervisor.Member{
		{Pool: DefaultPool, URL: urls["default"].url, Weight: 1},
		{Pool: "d", URL: urls["d"].url, Weight: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 1 || got[1] != before[0] {
		t.Errorf("the membership replaced pool d's backend %v with %v; want it kept", before, got[1])
	}
}
