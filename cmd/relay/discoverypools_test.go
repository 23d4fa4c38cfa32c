package main

import (
	"fmt"
	"net/http"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"relay/internal/discovery"
	"relay/internal/etcdtest"
)

// startRegisteredServer runs cmd/server on a free loopback port,
// registered in etcd at endpoint under etcdPrefix in pool, and returns
// its URL and the greeting GET / answers with. It is killed at cleanup.
func startRegisteredServer(t *testing.T, bin, endpoint, pool string) (url, hello string) {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(bin, "-addr", "127.0.0.1:"+port, "-quiet",
		"-register", endpoint, "-register-prefix", etcdPrefix, "-register-ttl", "2s", "-pool", pool)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start cmd/server: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(exitTimeout):
			t.Errorf("cmd/server pid %d did not exit after SIGKILL", cmd.Process.Pid)
		}
	})
	select {
	case <-exited:
		t.Fatalf("cmd/server -pool %s exited at once: %s", pool, stderr.String())
	default:
	}
	return "http://127.0.0.1:" + port, "Hello World from " + port + " server\n"
}

// TestDiscoveryFillsTwoPools: two cmd/server processes register
// themselves in etcd with -pool a and -pool b, and a third value names a
// pool relay does not have. relay (two serving processes), whose file
// names pools a and b without backends and routes /a and /b to them,
// puts each server in its own pool only and leaves the third out: /a is
// answered by the first server, /b by the second, and a path no route
// takes goes to the default pool, which discovery may fill and which has
// no member: 503.
func TestDiscoveryFillsTwoPools(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	srv := etcdtest.Start(t)
	cli := srv.Client()
	aURL, aHello := startRegisteredServer(t, bin, srv.Endpoint, "a")
	bURL, bHello := startRegisteredServer(t, bin, srv.Endpoint, "b")
	stray := newBackend(t, nil)
	srv.Put(cli, discovery.PoolKeyFor(etcdPrefix, "c", stray.url), string(discovery.MarshalPool(stray.url, 1, "c")))

	file := writeConfig(t, "processes: 2\naccess_log: false\n"+discoveryYAML(srv.Endpoint)+`pools:
  a: {}
  b: {}
routes:
  - match: {path_prefix: /a}
    pool: a
  - match: {path_prefix: /b}
    pool: b
`)
	r, started := startRelay(t, "", "-config", file)
	admin := adminOf(t, started)

	// With discovery the default pool exists (etcd may fill it), empty here.
	want := map[string][]string{"default": {}, "a": {aURL}, "b": {bURL}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := inRotation(t, admin)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s relay's pools have %v in rotation, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range []struct{ path, hello string }{{"/a/x", aHello}, {"/b/x", bHello}} {
		for range 10 {
			if code, body := freshGet(t, r.addr, c.path); code != 200 || body != c.hello {
				t.Fatalf("GET %s: %d %q, want 200 %q", c.path, code, body, c.hello)
			}
		}
	}
	if code, body := freshGet(t, r.addr, "/z"); code != http.StatusServiceUnavailable {
		t.Fatalf("GET /z, which no route takes, with the default pool empty: %d %q, want 503", code, body)
	}
	if _, ok := r.waitLog(0, func(l logLine) bool {
		return l.Msg() == "discovered backend left out: relay has no pool of that name" && l.Str("backend") == stray.url && l.Str("pool") == "c"
	}); !ok {
		t.Errorf("no log line names the backend etcd put in pool c, which relay does not have\nstdout:\n%s", r.stdout.text())
	}
	r.stop()
}

// inRotation is GET /api/pools: the URLs of each pool's members in
// rotation, sorted.
func inRotation(t *testing.T, admin string) map[string][]string {
	t.Helper()
	code, v := adminCall(t, admin, "GET", "/api/pools", "")
	if code != 200 {
		t.Fatalf("GET /api/pools: %d %v", code, v)
	}
	out := map[string][]string{}
	pools, _ := v["pools"].([]any)
	for _, p := range pools {
		pm := p.(map[string]any)
		name := pm["pool"].(string)
		out[name] = []string{}
		bs, _ := pm["backends"].([]any)
		for _, b := range bs {
			if m := b.(map[string]any); m["in_rotation"] == true {
				out[name] = append(out[name], m["name"].(string))
			}
		}
		sort.Strings(out[name])
	}
	return out
}
