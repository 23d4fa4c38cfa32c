package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/proxy"
	"relay/internal/supervisor"
)

// TestReloadLosesNothing reloads relay 20 times while 50 clients send
// requests: weight changes, a backend added, one removed, and one invalid
// file, by SIGHUP and by POST /reload in turn. No request may fail, idle
// keep-alive connections must survive every reload, the added backend must
// take traffic within 2 s and the removed one none once it is gone.
func TestReloadLosesNothing(t *testing.T) {
	forProcesses(t, reloadUnderLoad)
}

func reloadUnderLoad(t *testing.T, processes int) {
	bs := newBackends(t, 4)
	added, removed := bs[3], bs[2]
	head := fmt.Sprintf("listen: 127.0.0.1:0\nlog_level: info\nprocesses: %d\naccess_log: false\nalgorithm: weighted-round-robin\n", processes)
	file := writeFile(t, t.TempDir(), "relay.yml", head+backendsYAML(urlsOf(bs[:3])))
	r, started := startRelay(t, "", "-config", file)
	admin := adminOf(t, started)

	// Idle keep-alive connections, each with one request answered; each
	// must still carry a request after the reloads.
	idle := make([]net.Conn, 5)
	for i := range idle {
		idle[i] = rawGet(t, r.addr, "/")
		defer idle[i].Close()
	}

	const clients = 50
	var (
		stop            atomic.Bool
		total, failed   atomic.Int64
		mu              sync.Mutex
		failures        []string
		firstAdded      time.Time // first answer from the added backend
		removedAt       time.Time // once set, answers from the removed backend are counted
		fromRemovedLate int
		wg              sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for !stop.Load() {
				resp, err := c.Get(r.url("/"))
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				total.Add(1)
				now := time.Now()
				mu.Lock()
				switch {
				case err != nil || resp.StatusCode != 200:
					failed.Add(1)
					if len(failures) < 10 {
						failures = append(failures, fmt.Sprintf("%v %v %q", err, resp, body))
					}
				case string(body) == added.hello && firstAdded.IsZero():
					firstAdded = now
				case string(body) == removed.hello && !removedAt.IsZero() && now.Sub(removedAt) > 500*time.Millisecond:
					fromRemovedLate++
				}
				mu.Unlock()
				// About 2,500 requests a second from the 50 clients: load
				// enough to span every reload, without starving the tests
				// that run beside this one.
				time.Sleep(20 * time.Millisecond)
			}
		})
	}

	var addedAt time.Time
	reload := func(i int, content string) {
		if err := writeFileAtomic(file, head+content); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			r.signal(syscall.SIGHUP)
			return
		}
		code, v := adminCall(t, admin, "POST", "/reload", "")
		if strings.HasPrefix(content, "bogus") {
			if code != 400 || !strings.Contains(fmt.Sprint(v["problems"]), "bogus") {
				t.Errorf("POST /reload of an invalid file: %d %v; want 400 naming the problem", code, v)
			}
			return
		}
		if code != 200 {
			t.Errorf("POST /reload: %d %v", code, v)
		}
	}
	time.Sleep(300 * time.Millisecond)
	for i := range 20 {
		urls, weights := urlsOf(bs[:3]), []int{1 + i%3, 1 + i%5, 2}
		switch {
		case i == 15:
			reload(1, "bogus: key\n"+backendsYAML(urls, weights...)) // POST: refused, says why
			time.Sleep(150 * time.Millisecond)
			continue
		case i >= 10:
			urls, weights = []string{bs[0].url, bs[1].url, added.url}, []int{1, 1, 2}
		case i >= 5:
			urls, weights = urlsOf(bs), []int{1 + i%3, 1, 2, 2}
		}
		reload(i, backendsYAML(urls, weights...))
		if i == 5 {
			addedAt = time.Now()
		}
		if i == 10 {
			mu.Lock()
			removedAt = time.Now()
			mu.Unlock()
		}
		time.Sleep(150 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	for i, c := range idle {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n"); err != nil {
			t.Fatalf("idle connection %d after the reloads: %v", i, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("idle connection %d after the reloads: %v %v", i, resp, err)
		}
		resp.Body.Close()
	}
	if failed.Load() > 0 {
		t.Fatalf("%d of %d requests failed across the reloads; first: %v", failed.Load(), total.Load(), failures)
	}
	if firstAdded.IsZero() || firstAdded.Sub(addedAt) > 2*time.Second {
		t.Fatalf("the added backend's first answer came %v after its reload, want within 2 s", firstAdded.Sub(addedAt))
	}
	if fromRemovedLate > 0 {
		t.Fatalf("the removed backend answered %d requests more than 500 ms after its reload", fromRemovedLate)
	}
	var reloaded, refused int
	for _, l := range r.logs() {
		switch l.Msg() {
		case "configuration reloaded":
			reloaded++
		case "reload refused: the configuration is invalid; relay keeps serving the one it runs":
			refused++
			if !strings.Contains(fmt.Sprint(l["problems"]), "bogus: unknown key") {
				t.Errorf("refused reload logged %v; want the problem named", l)
			}
		}
	}
	if reloaded != 19 || refused != 1 {
		t.Fatalf("log says %d reloads and %d refused, want 19 and 1", reloaded, refused)
	}
	m := scrape(t, admin)
	if m[`relay_config_reloads_total{result="success"}`] != 19 || m[`relay_config_reloads_total{result="failure"}`] != 1 || m["relay_config_generation"] != 20 {
		t.Fatalf("reload metrics: success %v, failure %v, generation %v; want 19, 1, 20",
			m[`relay_config_reloads_total{result="success"}`], m[`relay_config_reloads_total{result="failure"}`], m["relay_config_generation"])
	}
	t.Logf("processes=%d: %d requests, none failed, across 20 reloads; added backend answered %v after its reload",
		processes, total.Load(), firstAdded.Sub(addedAt).Round(time.Millisecond))
}

// TestReloadAppliesPoolSettingsAndNamesTheRest: a reload switches the
// algorithm while relay serves (round robin to ip-hash: one client then
// sticks to one backend), and a changed setting that needs a restart is
// named in the log instead of being ignored silently.
func TestReloadAppliesPoolSettingsAndNamesTheRest(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 3)
	file := writeFile(t, t.TempDir(), "relay.yml", "listen: 127.0.0.1:0\naccess_log: false\n"+backendsYAML(urlsOf(bs)))
	r, started := startRelay(t, "", "-config", file)
	admin := adminOf(t, started)
	if _, v := adminCall(t, admin, "GET", "/api/backends", ""); v["algorithm"] != "round-robin" {
		t.Fatalf("the admin API names the algorithm %v, want round-robin", v["algorithm"])
	}
	c := newClient(t)
	if got := sequence(t, c, r, 6); got[0] == got[1] {
		t.Fatalf("round robin answered %v", got)
	}
	if err := writeFileAtomic(file, "listen: 127.0.0.1:1\nmax_connections: 99\naccess_log: false\nalgorithm: ip-hash\n"+backendsYAML(urlsOf(bs))); err != nil {
		t.Fatal(err)
	}
	r.signal(syscall.SIGHUP)
	warn, ok := r.waitLog(5*time.Second, func(l logLine) bool { return strings.HasPrefix(l.Msg(), "reload: these settings changed") })
	if !ok {
		t.Fatalf("no warning naming the restart-only settings; log:\n%s", r.stdout.text())
	}
	if got := fmt.Sprint(warn["settings"]); got != "[listen max_connections]" {
		t.Fatalf("restart-only settings named %s, want [listen max_connections]", got)
	}
	if _, ok := r.waitLog(5*time.Second, func(l logLine) bool { return l.Msg() == "configuration reloaded" }); !ok {
		t.Fatal("no reload logged")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := sequence(t, c, r, 6)
		same := true
		for _, g := range got {
			same = same && g == got[0]
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the reload to ip-hash one client still spreads: %v", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The admin API and the dashboard name the algorithm relay now runs.
	if _, v := adminCall(t, admin, "GET", "/api/backends", ""); v["algorithm"] != "ip-hash" {
		t.Fatalf("after the reload the admin API names the algorithm %v, want ip-hash", v["algorithm"])
	}
	r.stop()
}

// TestMembershipChangesACapInPlace: a membership whose only change is a
// backend's max_requests keeps that backend in the serving process, with
// its health, operator state and counters, and the process enforces its
// share of the new cap.
func TestMembershipChangesACapInPlace(t *testing.T) {
	u, err := url.Parse("http://127.0.0.1:8001")
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.New(u, 1)
	if err != nil {
		t.Fatal(err)
	}
	b.SetMaxRequests(2)
	p, err := proxy.New(proxy.ConfigFrom(config.Default()), []*backend.Backend{b})
	if err != nil {
		t.Fatal(err)
	}
	b.SetHealthy(false)
	b.SetDraining(true)
	b.Acquire()
	share := func(n int) int { return supervisor.Share(n, 2, 0) }
	log := slog.New(slog.DiscardHandler)
	got := applyMembership(p, []supervisor.Member{{Pool: "default", URL: b.Name, Weight: 3, MaxRequests: 12}}, share, newUpstreams(config.Default(), log), log)
	if len(got) != 1 || got[0] != b || p.Backends()[0] != b {
		t.Fatalf("the pool holds %v after the change; want the same backend %s", p.Backends(), b.Name)
	}
	if b.MaxRequests() != 6 || b.EffectiveWeight() != 3 {
		t.Errorf("cap %d and weight %d; want this process's share of 12 (6) and 3", b.MaxRequests(), b.EffectiveWeight())
	}
	if b.Healthy() || !b.Draining() || b.InFlight() != 1 || b.Served() != 1 {
		t.Errorf("the backend's state after the change: %+v, %d in flight, %d served; want down, draining, its request counted",
			b.State(), b.InFlight(), b.Served())
	}
}
