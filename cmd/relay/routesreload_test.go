package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// routeTable is the pools and routes of one configuration generation in
// TestRoutesReloadUnderLoad. Generation g has pools a and b; c unless g
// is a multiple of 3; d when g is even; /a and /b swapped when g%4 is 3;
// and a default pool unless g is a multiple of 5. Each path /a, /b, /c,
// /d has a route to the pool of its name when that pool exists; /z has
// none.
type routeTable struct {
	gen    int
	routes map[string]string // path prefix -> pool
	pools  []string          // named pools, file order
	deflt  bool
}

var routedPaths = []string{"/a", "/b", "/c", "/d", "/z"}

func tableOf(g int) routeTable {
	t := routeTable{gen: g, routes: map[string]string{"/a": "a", "/b": "b"}, pools: []string{"a", "b"}, deflt: g%5 != 0}
	if g%3 != 0 {
		t.pools = append(t.pools, "c")
		t.routes["/c"] = "c"
	}
	if g%2 == 0 {
		t.pools = append(t.pools, "d")
		t.routes["/d"] = "d"
	}
	if g%4 == 3 {
		t.routes["/a"], t.routes["/b"] = "b", "a"
	}
	return t
}

// yaml is the table as the file's pools and routes; every route sets
// X-Gen to the generation, which the backends echo.
func (rt routeTable) yaml(bs map[string][]*poolBackend) string {
	var b strings.Builder
	if rt.deflt {
		fmt.Fprintf(&b, "backends: %s\n", poolURLs(bs["default"]...))
	}
	b.WriteString("pools:\n")
	for _, p := range rt.pools {
		fmt.Fprintf(&b, "  %s:\n    backends: %s\n", p, poolURLs(bs[p]...))
	}
	b.WriteString("routes:\n")
	for _, path := range routedPaths {
		if p, ok := rt.routes[path]; ok {
			fmt.Fprintf(&b, "  - name: to-%s\n    match: {path_prefix: %s}\n    pool: %s\n    request_headers: {set: {X-Gen: \"%d\"}}\n",
				p, path, p, rt.gen)
		}
	}
	return b.String()
}

// allows reports whether the table lets a request for path be answered
// with code by a backend of pool (pool "" for relay's own 404).
func (rt routeTable) allows(path string, code int, pool string) bool {
	if p, ok := rt.routes[path]; ok {
		return code == 200 && pool == p
	}
	if rt.deflt {
		return code == 200 && pool == "default"
	}
	return code == 404 && pool == ""
}

// TestRoutesReloadUnderLoad: relay with named pools and routes is
// reloaded 20 times (by SIGHUP and POST /reload in turn) while 50 clients,
// 40 over HTTP/1.1 keep-alive and 10 over h2c, send requests whose route
// is known. The tables add and remove pools, swap which path goes to
// which pool, and drop and restore the default pool. No request may fail,
// and each answer must come from the pool its route names in a table in
// force while the request ran: a route's answer carries its table's
// generation, which must be the one in force or the one before it, and
// an unrouted answer (default pool or 404) must be what one of those
// tables says.
func TestRoutesReloadUnderLoad(t *testing.T) {
	forProcesses(t, routesReloadUnderLoad)
}

func routesReloadUnderLoad(t *testing.T, processes int) {
	bs := map[string][]*poolBackend{}
	byPort := map[string]string{} // backend port -> its pool
	for _, p := range []string{"default", "a", "b", "c", "d"} {
		bs[p] = newPoolBackends(t, p, 2)
		for _, b := range bs[p] {
			byPort[b.port] = p
		}
	}
	head := fmt.Sprintf("listen: 127.0.0.1:0\nlog_level: info\nprocesses: %d\naccess_log: false\nh2c: true\n", processes)
	file := writeFile(t, t.TempDir(), "relay.yml", head+tableOf(1).yaml(bs))
	r, started := startRelay(t, "", "-config", file)
	admin := adminOf(t, started)

	// written is the newest generation whose file relay may have read;
	// confirmed the newest relay said it runs. Every process runs at
	// least the one before confirmed: a process a whole reload behind is
	// a failure.
	var written, confirmed atomic.Int64
	written.Store(1)
	confirmed.Store(1)

	const clients = 50
	var (
		stop     atomic.Bool
		total    atomic.Int64
		mu       sync.Mutex
		failures []string
		failed   int
		seen     = map[string]bool{} // "path code pool" combinations answered
		wg       sync.WaitGroup
	)
	fail := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		failed++
		if len(failures) < 10 {
			failures = append(failures, s)
		}
	}
	for i := range clients {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			proto := "http/1.1"
			if i%5 == 0 {
				tr.Protocols = new(http.Protocols)
				tr.Protocols.SetUnencryptedHTTP2(true)
				proto = "h2c"
			}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for n := 0; !stop.Load(); n++ {
				path := routedPaths[(i+n)%len(routedPaths)]
				lo := max(confirmed.Load()-1, 1)
				resp, err := c.Get(r.url(path + "/x" + strconv.Itoa(n)))
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				hi := written.Load()
				total.Add(1)
				if err != nil {
					fail(fmt.Sprintf("%s %s: %v", proto, path, err))
					continue
				}
				if msg := judge(path, resp.StatusCode, string(body), byPort, lo, hi); msg != "" {
					fail(fmt.Sprintf("%s %s: %s (generations %d..%d)", proto, path, msg, lo, hi))
					continue
				}
				a, _ := parseAnswer(string(body))
				mu.Lock()
				seen[fmt.Sprintf("%s %d %s", path, resp.StatusCode, a.pool)] = true
				mu.Unlock()
				// About 2,500 requests a second from the 50 clients:
				// every table serves a few hundred, without starving
				// the tests that run beside this one.
				time.Sleep(20 * time.Millisecond)
			}
		})
	}

	time.Sleep(200 * time.Millisecond)
	for g := 2; g <= 21; g++ {
		written.Store(int64(g))
		if err := writeFileAtomic(file, head+tableOf(g).yaml(bs)); err != nil {
			t.Fatal(err)
		}
		if g%2 == 0 {
			r.signal(syscall.SIGHUP)
			if _, ok := r.waitLog(10*time.Second, func(l logLine) bool {
				return l.Msg() == "configuration reloaded" && l.Num("generation") == g
			}); !ok {
				t.Fatalf("generation %d: no reload logged after SIGHUP\nstdout:\n%s", g, r.stdout.text())
			}
		} else if code, v := adminCall(t, admin, "POST", "/reload", ""); code != 200 || v["generation"] != float64(g) {
			t.Fatalf("generation %d: POST /reload answered %d %v", g, code, v)
		}
		confirmed.Store(int64(g))
		time.Sleep(150 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	if failed > 0 {
		t.Fatalf("%d of %d requests failed or reached the wrong pool across the reloads; first: %s",
			failed, total.Load(), strings.Join(failures, "\n"))
	}
	// The load must have seen every kind of table, or the test proved
	// less than it says.
	for _, want := range []string{"/a 200 b", "/b 200 a", "/a 200 a", "/c 200 c", "/c 200 default", "/d 200 d", "/z 200 default", "/z 404 "} {
		if !seen[want] {
			t.Errorf("no request answered %q across the reloads; answers seen: %v", want, seen)
		}
	}
	m := scrape(t, admin)
	if m[`relay_config_reloads_total{result="success"}`] != 20 || m["relay_config_generation"] != 21 {
		t.Errorf("reload metrics: success %v, generation %v; want 20 and 21",
			m[`relay_config_reloads_total{result="success"}`], m["relay_config_generation"])
	}
	t.Logf("processes=%d: %d requests over HTTP/1.1 and h2c, none failed or misrouted, across 20 reloads of pools and routes",
		processes, total.Load())
	r.stop()
}

// judge says what is wrong with the answer code, body to a request for
// path sent while generations lo..hi may have been in force, or "" when
// nothing is. A routed answer names its generation, which must be one of
// those and route path to the answering backend's pool; an unrouted
// answer must be what one of them says.
func judge(path string, code int, body string, byPort map[string]string, lo, hi int64) string {
	if code == 404 {
		for g := lo; g <= hi; g++ {
			if tableOf(int(g)).allows(path, 404, "") {
				return ""
			}
		}
		return fmt.Sprintf("404 %q, though every table in force routes it", body)
	}
	a, ok := parseAnswer(body)
	if code != 200 || !ok {
		return fmt.Sprintf("status %d, body %q", code, body)
	}
	if byPort[a.port] != a.pool {
		return fmt.Sprintf("answer %q from an unknown backend", body)
	}
	if a.gen == "-" {
		for g := lo; g <= hi; g++ {
			if tableOf(int(g)).allows(path, 200, a.pool) && !routed(int(g), path) {
				return ""
			}
		}
		return fmt.Sprintf("unrouted answer from pool %s, which no table in force gives", a.pool)
	}
	g, err := strconv.ParseInt(a.gen, 10, 64)
	if err != nil || g < lo || g > hi {
		return fmt.Sprintf("answer %q by a route of generation %s, not in force", body, a.gen)
	}
	if want := tableOf(int(g)).routes[path]; want != a.pool {
		return fmt.Sprintf("answer %q from pool %s; generation %d routes it to %q", body, a.pool, g, want)
	}
	return ""
}

// routed reports whether generation g has a route for path.
func routed(g int, path string) bool {
	_, ok := tableOf(g).routes[path]
	return ok
}
