package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"relay/internal/discovery"
	"relay/internal/etcdtest"
)

const etcdPrefix = "/relay/backends/"

// discoveryYAML is a discovery section watching etcdPrefix at endpoint.
func discoveryYAML(endpoint string) string {
	return fmt.Sprintf("discovery:\n  etcd:\n    endpoints: [%s]\n    prefix: %s\n    dial_timeout: 1s\n", endpoint, etcdPrefix)
}

// announce puts b under etcdPrefix+name, with weight 1 and opts.
func announce(srv *etcdtest.Server, cli *clientv3.Client, name string, b *backendServer, opts ...clientv3.OpOption) {
	srv.Put(cli, etcdPrefix+name, string(discovery.Marshal(b.url, 1)), opts...)
}

// load is clients sending GET / through relay until finish, each with a
// short pause between requests. It records, per backend greeting, when
// the first and the last request it answered were sent, so a test can
// tell when a backend began and stopped taking new requests.
type load struct {
	stop          atomic.Bool
	wg            sync.WaitGroup
	mu            sync.Mutex
	total, failed int
	failures      []string
	first, last   map[string]time.Time
}

func startLoad(url string, clients int) *load {
	l := &load{first: map[string]time.Time{}, last: map[string]time.Time{}}
	for range clients {
		l.wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for !l.stop.Load() {
				sent := time.Now()
				resp, err := c.Get(url)
				var body []byte
				if err == nil {
					body, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				l.mu.Lock()
				l.total++
				if err != nil || resp.StatusCode != 200 {
					l.failed++
					if len(l.failures) < 10 {
						l.failures = append(l.failures, fmt.Sprintf("%v %v %q", err, resp, body))
					}
				} else {
					h := string(body)
					if _, ok := l.first[h]; !ok {
						l.first[h] = sent
					}
					if sent.After(l.last[h]) {
						l.last[h] = sent
					}
				}
				l.mu.Unlock()
				// A pause per request keeps the load at a few thousand
				// requests a second: enough to span every change without
				// starving the tests that run beside this one.
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	return l
}

// finish stops the clients and fails t if any request failed.
func (l *load) finish(t *testing.T) {
	t.Helper()
	l.stop.Store(true)
	l.wg.Wait()
	if l.failed > 0 {
		t.Fatalf("%d of %d requests failed; first: %v", l.failed, l.total, l.failures)
	}
}

// since is when b's first request after t0 was sent (ok false if none).
func (l *load) firstAnswer(b *backendServer) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.first[b.hello]
	return at, ok
}

func (l *load) lastAnswer(b *backendServer) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[b.hello]
}

// awaitFirstAnswer waits until b has answered a request sent after t0 and
// returns how long after t0 that request was sent.
func (l *load) awaitFirstAnswer(t *testing.T, b *backendServer, t0 time.Time, within time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if at, ok := l.firstAnswer(b); ok && !at.Before(t0) {
			return at.Sub(t0)
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend %s answered nothing within %v", b.url, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDiscoveryUnderLoad: 50 clients for 20 s through a relay whose only
// backends are in etcd, while ten changes register and deregister
// backends. No request fails; an added backend takes requests, and a
// removed one stops taking new ones, within 1 s of the change in etcd.
func TestDiscoveryUnderLoad(t *testing.T) {
	forProcesses(t, discoveryUnderLoad)
}

func discoveryUnderLoad(t *testing.T, processes int) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	bs := newBackends(t, 8)
	announce(srv, cli, "b0", bs[0])
	announce(srv, cli, "b1", bs[1])
	file := writeConfig(t, fmt.Sprintf("processes: %d\naccess_log: false\nalgorithm: round-robin\n", processes)+discoveryYAML(srv.Endpoint))
	r, _ := startRelay(t, "", "-config", file)
	// Wait for the first list to reach the processes.
	awaitAnswer(t, r.url("/"), "", 10*time.Second)
	// relay reads the list first and then opens the watch that brings
	// the changes; on a loaded machine that can take a while after the
	// list is served. What is timed below is a change in steady state,
	// so one change comes through first: a backend announced, seen
	// answering, withdrawn and seen gone.
	warm := bs[7]
	announce(srv, cli, "warm", warm)
	awaitAnswer(t, r.url("/"), warm.hello, 10*time.Second)
	srv.Delete(cli, etcdPrefix+"warm")
	awaitGone(t, r.url("/"), warm.hello, 10*time.Second)

	l := startLoad(r.url("/"), 50)
	// Ten changes over 20 s: b2..b6 join one by one, and b0, b1, b2, b3,
	// b4 leave, so at least two backends serve at every moment.
	var slowest time.Duration
	var removals []struct {
		b  *backendServer
		at time.Time
	}
	step := 2 * time.Second
	time.Sleep(step / 2)
	for i := range 5 {
		joined := bs[2+i]
		at := time.Now()
		announce(srv, cli, fmt.Sprintf("b%d", 2+i), joined)
		slowest = max(slowest, l.awaitFirstAnswer(t, joined, at, 2*time.Second))
		time.Sleep(step - time.Since(at))

		left := bs[i]
		at = time.Now()
		srv.Delete(cli, fmt.Sprintf("%sb%d", etcdPrefix, i))
		removals = append(removals, struct {
			b  *backendServer
			at time.Time
		}{left, at})
		time.Sleep(step - time.Since(at))
	}
	l.finish(t)
	for _, rm := range removals {
		late := l.lastAnswer(rm.b).Sub(rm.at)
		slowest = max(slowest, late)
		if late > time.Second {
			t.Errorf("backend %s took new requests until %v after its key was deleted, want under 1 s", rm.b.url, late)
		}
	}
	if slowest > time.Second {
		t.Errorf("the slowest change took %v to reach the requests, want under 1 s", slowest)
	}
	for _, b := range bs[5:7] {
		if _, ok := l.firstAnswer(b); !ok {
			t.Errorf("backend %s, registered, never answered", b.url)
		}
	}
	t.Logf("processes=%d: %d requests in 20 s across 10 changes, none failed; slowest change reached the requests in %v",
		processes, l.total, slowest.Round(time.Millisecond))
}

// TestDiscoveryDropsABackendWhoseLeaseExpires: a backend announced under
// a lease that stops being kept alive (its process died) leaves relay's
// pool within the lease's TTL and a second.
func TestDiscoveryDropsABackendWhoseLeaseExpires(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	cli := srv.Client()
	bs := newBackends(t, 2)
	announce(srv, cli, "steady", bs[0])
	file := writeConfig(t, "access_log: false\n"+discoveryYAML(srv.Endpoint))
	r, started := startRelay(t, "", "-config", file)
	admin := adminOf(t, started)

	const ttl = 2 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lease, err := cli.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		t.Fatal(err)
	}
	alive, err := cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for range alive {
		}
	}()
	announce(srv, cli, "mortal", bs[1], clientv3.WithLease(lease.ID))
	awaitMembers(t, admin, 5*time.Second, bs[0].url, bs[1].url)
	// A request reaches it: it is in the pool, not only listed.
	c := newClient(t)
	seen := map[string]bool{}
	for range 10 {
		_, body := get(t, c, r.url("/"))
		seen[body] = true
	}
	if !seen[bs[1].hello] {
		t.Fatalf("the leased backend took none of 10 requests: %v", seen)
	}

	cancel() // the keep-alives stop, as when the backend's process dies
	died := time.Now()
	awaitMembers(t, admin, ttl+time.Second, bs[0].url)
	t.Logf("gone %v after the last keep-alive (ttl %v)", time.Since(died).Round(time.Millisecond), ttl)
	src := backendsOf(t, admin)[bs[0].url]
	if src["source"] != "etcd" || src["key"] != etcdPrefix+"steady" {
		t.Errorf("the admin API shows %v; want source etcd and the key", src)
	}
}

// awaitAnswer waits until GET url answers 200 with body want (any body
// when want is "").
// awaitGone waits until ten answers in a row from url are not gone's.
func awaitGone(t *testing.T, url, gone string, within time.Duration) {
	t.Helper()
	c := newClient(t)
	deadline := time.Now().Add(within)
	for clean := 0; clean < 10; {
		if code, body := get(t, c, url); code == 200 && body != gone {
			clean++
		} else {
			clean = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v GET %s still answers %q", within, url, gone)
		}
	}
}

func awaitAnswer(t *testing.T, url, want string, within time.Duration) {
	t.Helper()
	c := newClient(t)
	deadline := time.Now().Add(within)
	for {
		code, body := get(t, c, url)
		if code == 200 && (want == "" || body == want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v GET %s answers %d %q, want 200 %q", within, url, code, body, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitMembers waits until GET /api/backends lists exactly names.
// awaitUp waits until every backend the admin API lists is up.
func awaitUp(t *testing.T, admin string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		down := ""
		for name, b := range backendsOf(t, admin) {
			if b["state"] != "up" {
				down = fmt.Sprintf("%s is %v", name, b["state"])
			}
		}
		if down == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v %s", within, down)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func awaitMembers(t *testing.T, admin string, within time.Duration, names ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := backendsOf(t, admin)
		ok := len(got) == len(names)
		for _, n := range names {
			_, has := got[n]
			ok = ok && has
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var have []string
			for n := range got {
				have = append(have, n)
			}
			t.Fatalf("after %v relay lists %v, want %v", within, have, names)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDiscoverySurvivesAnEtcdOutage: etcd is stopped for 10 s while 50
// clients send requests. relay keeps serving the last set it knew, with
// no failed request, logs the loss once, and when etcd is back lists the
// prefix afresh: a backend announced then joins, one deleted then leaves.
func TestDiscoverySurvivesAnEtcdOutage(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	cli := srv.Client()
	bs := newBackends(t, 3)
	announce(srv, cli, "b0", bs[0])
	announce(srv, cli, "b1", bs[1])
	file := writeConfig(t, "processes: 2\naccess_log: false\nalgorithm: round-robin\n"+discoveryYAML(srv.Endpoint))
	r, started := startRelay(t, "", "-config", file)
	admin := adminOf(t, started)
	awaitMembers(t, admin, 10*time.Second, bs[0].url, bs[1].url)

	l := startLoad(r.url("/"), 50)
	time.Sleep(time.Second)
	srv.Stop()
	stopped := time.Now()
	if _, ok := r.waitLog(10*time.Second, func(l logLine) bool { return strings.HasPrefix(l.Msg(), "discovery: lost etcd") }); !ok {
		t.Error("relay did not log losing etcd")
	}
	time.Sleep(10*time.Second - time.Since(stopped))
	srv.Start()
	back := time.Now()
	cli = srv.Client()
	announce(srv, cli, "b2", bs[2])
	srv.Delete(cli, etcdPrefix+"b0")
	awaitMembers(t, admin, 10*time.Second, bs[1].url, bs[2].url)
	resynced := time.Since(back)
	joined := l.awaitFirstAnswer(t, bs[2], back, 2*time.Second)
	time.Sleep(500 * time.Millisecond)
	l.finish(t)

	var lost int
	for _, line := range r.logs() {
		if strings.HasPrefix(line.Msg(), "discovery: lost etcd") || strings.Contains(line.Msg(), "cannot be reached") {
			lost++
		}
	}
	if lost != 1 {
		t.Errorf("%d log lines about losing etcd, want 1", lost)
	}
	t.Logf("%d requests across a 10 s etcd outage, none failed; the set was listed afresh %v after etcd returned, the new backend answered %v after it",
		l.total, resynced.Round(time.Millisecond), joined.Round(time.Millisecond))
}

// TestDiscoveryStartsWithoutEtcd: with etcd down and no backend in the
// file, relay starts, says why it has no backend, and answers 503; when
// etcd comes up, the backends in it serve.
func TestDiscoveryStartsWithoutEtcd(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	cli := srv.Client()
	b := newBackend(t, nil)
	announce(srv, cli, "b0", b)
	srv.Stop()
	file := writeConfig(t, "access_log: false\n"+discoveryYAML(srv.Endpoint))
	r, started := startRelay(t, "", "-config", file)
	if got, want := started.Str("discovery"), "etcd "+etcdPrefix; got != want {
		t.Errorf("the start line says discovery %q, want %q", got, want)
	}
	if _, ok := r.waitLog(10*time.Second, func(l logLine) bool { return strings.Contains(l.Msg(), "cannot be reached at start") }); !ok {
		t.Fatalf("relay did not say etcd cannot be reached:\n%s", r.stdout.text())
	}
	c := newClient(t)
	if code, body := get(t, c, r.url("/")); code != 503 {
		t.Fatalf("with no backend, GET / answered %d %q, want 503", code, body)
	}
	srv.Start()
	awaitAnswer(t, r.url("/"), b.hello, 10*time.Second)
}

// TestInstancesAgreeOnIPHash: three relay instances fed by one etcd map
// each of 10,000 client addresses to the same backend, though one saw the
// backends arrive one by one, one listed them all at start and one runs
// two processes. When a backend's key is deleted, only the addresses it
// served move, and they move to the same backends on all three.
func TestInstancesAgreeOnIPHash(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	cli := srv.Client()
	bs := newBackends(t, 5)
	// The checks only connect: an instance whose HTTP check of a backend
	// timed out on a loaded machine would hash around that backend, which
	// is right, but not what this test is about.
	head := "access_log: false\nalgorithm: ip-hash\nhealth_check_type: tcp\ntrusted_proxies: [127.0.0.1/32]\n" + discoveryYAML(srv.Endpoint)
	var relays []*relay
	var admins []string
	start := func(processes int) {
		r, started := startRelay(t, "", "-config", writeConfig(t, fmt.Sprintf("processes: %d\n", processes)+head))
		relays, admins = append(relays, r), append(admins, adminOf(t, started))
	}
	all := func(b []*backendServer) []string { return urlsOf(b) }

	start(1) // sees the backends arrive one by one, in no particular order
	for _, i := range []int{3, 0, 4, 1, 2} {
		announce(srv, cli, fmt.Sprintf("node-%d", 9-i), bs[i])
	}
	start(1) // lists them at start
	start(2)
	for _, a := range admins {
		awaitMembers(t, a, 10*time.Second, all(bs)...)
		awaitUp(t, a, 10*time.Second)
	}

	const keys = 10000
	before := mapAddresses(t, relays, keys)
	counts := map[string]int{}
	for _, b := range before {
		counts[strings.TrimSuffix(strings.TrimPrefix(b, "Hello World from "), " server\n")]++
	}
	t.Logf("10,000 addresses over 5 backends (by port): %v", counts)
	if len(counts) != len(bs) {
		t.Fatalf("the addresses reached %d backends, want all %d", len(counts), len(bs))
	}

	gone := bs[2]
	srv.Delete(cli, etcdPrefix+"node-7")
	rest := append(append([]*backendServer{}, bs[:2]...), bs[3:]...)
	for _, a := range admins {
		awaitMembers(t, a, 10*time.Second, all(rest)...)
	}
	// The admin API lists what an instance's control knows; its serving
	// processes apply it a moment later. Wait until none still sends the
	// removed backend's addresses to it.
	var its []int
	for i := range keys {
		if before[i] == gone.hello && len(its) < 50 {
			its = append(its, i)
		}
	}
	awaitLeft(t, relays, its, gone.hello, 10*time.Second)
	after := mapAddresses(t, relays, keys)
	moved := 0
	for i := range keys {
		switch {
		case before[i] == gone.hello:
			moved++
			if after[i] == gone.hello {
				t.Fatalf("address %d still reaches the removed backend", i)
			}
		case after[i] != before[i]:
			t.Fatalf("address %d moved from %q to %q, though its backend stayed", i, before[i], after[i])
		}
	}
	t.Logf("after removing one backend, %d addresses moved (all of its own), the same way on all three", moved)
}

// awaitLeft waits until no relay answers the client addresses numbered
// its (as mapAddresses numbers them) with the greeting of a backend that
// left, and fails t when one still does after within.
func awaitLeft(t *testing.T, relays []*relay, its []int, greeting string, within time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(within)
	for _, r := range relays {
		for _, i := range its {
			for {
				req, _ := http.NewRequest("GET", r.url("/"), nil)
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != greeting {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%v after the backend left, a relay still sends address %d to it", within, i)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// mapAddresses sends one request per client address (10.a.b.c, given in
// X-Forwarded-For, which relay believes from 127.0.0.1) through every
// relay, fails t unless all of them answer from the same backend, and
// returns the answering greeting per address.
func mapAddresses(t *testing.T, relays []*relay, n int) []string {
	t.Helper()
	out := make([]string, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var disagree []string
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			tr := &http.Transport{MaxIdleConnsPerHost: 1}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for i := w; i < n; i += workers {
				ip := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
				var answers []string
				for _, r := range relays {
					req, _ := http.NewRequest("GET", r.url("/"), nil)
					req.Header.Set("X-Forwarded-For", ip)
					resp, err := c.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					answers = append(answers, string(body))
				}
				mu.Lock()
				out[i] = answers[0]
				for _, a := range answers[1:] {
					if a != answers[0] && len(disagree) < 5 {
						disagree = append(disagree, fmt.Sprintf("%s: %q", ip, answers))
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(disagree) > 0 {
		t.Fatalf("the instances disagree: %v", disagree)
	}
	return out
}

// TestRelayAnnouncesItself: a relay with discovery.etcd.announce keeps its
// own key under another prefix while it serves, in the format relay reads
// backends in, so a relay in front discovers it as a backend; it takes
// the key out as it begins to stop.
func TestRelayAnnouncesItself(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	cli := srv.Client()
	b := newBackend(t, nil)
	announce(srv, cli, "b0", b)
	port := freePort(t)
	innerURL := "http://127.0.0.1:" + port
	innerYAML := func(ttl string, weight int) string {
		return "listen: 127.0.0.1:" + port + "\naccess_log: false\nprocesses: 2\n" + discoveryYAML(srv.Endpoint) +
			"    announce:\n      url: " + innerURL + "\n      prefix: /relay/instances/\n      ttl: " + ttl + fmt.Sprintf("\n      weight: %d\n", weight)
	}
	innerFile := writeFile(t, t.TempDir(), "inner.yml", innerYAML("3s", 2))
	inner, _ := startRelay(t, "", "-config", innerFile)
	outerYAML := fmt.Sprintf("access_log: false\ndiscovery:\n  etcd:\n    endpoints: [%s]\n    prefix: /relay/instances/\n", srv.Endpoint)
	outer, started := startRelay(t, "", "-config", writeConfig(t, outerYAML))
	admin := adminOf(t, started)
	awaitMembers(t, admin, 10*time.Second, innerURL)
	if w := backendsOf(t, admin)[innerURL]["weight"]; w != float64(2) {
		t.Errorf("the outer relay gives the inner one weight %v, want 2", w)
	}
	awaitAnswer(t, outer.url("/"), b.hello, 10*time.Second)

	// A reload that changes the announcement's weight and lease puts the
	// key anew without ever deleting it: the outer relay never loses
	// the inner one.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := cli.Watch(ctx, "/relay/instances/", clientv3.WithPrefix())
	if err := writeFileAtomic(innerFile, innerYAML("4s", 3)); err != nil {
		t.Fatal(err)
	}
	inner.signal(syscall.SIGHUP)
	deadline := time.Now().Add(5 * time.Second)
	for backendsOf(t, admin)[innerURL]["weight"] != float64(3) {
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the reload the outer relay shows %v", backendsOf(t, admin)[innerURL])
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	cancel()
	for ev := range events {
		for _, e := range ev.Events {
			if e.Type == clientv3.EventTypeDelete {
				t.Fatalf("the reload deleted %s before putting it again", e.Kv.Key)
			}
		}
	}

	inner.signal(syscall.SIGTERM)
	awaitMembers(t, admin, 2*time.Second) // within the lease: revoked, not expired
	if _, exited := inner.wait(exitTimeout); !exited {
		t.Fatal("the inner relay did not stop")
	}
}
