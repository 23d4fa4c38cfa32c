package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// adminOf is the admin listener's address from relay's start line.
func adminOf(t *testing.T, started logLine) string {
	t.Helper()
	a := started.Str("admin")
	if a == "" || a == "off" {
		t.Fatalf("start line %v names no admin listener", started)
	}
	return "http://" + a
}

// adminCall sends method path (with a JSON body when body is not "") to the
// admin listener and decodes the JSON answer. A call that changes
// something says it is JSON, body or not, as the admin listener requires.
func adminCall(t *testing.T, admin, method, path, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, admin+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if method != "GET" && method != "HEAD" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %v", method, path, err)
	}
	return resp.StatusCode, v
}

// backendsOf is GET /api/backends, its backends by name.
func backendsOf(t *testing.T, admin string) map[string]map[string]any {
	t.Helper()
	code, v := adminCall(t, admin, "GET", "/api/backends", "")
	if code != 200 {
		t.Fatalf("GET /api/backends: %d %v", code, v)
	}
	out := map[string]map[string]any{}
	list, _ := v["backends"].([]any)
	for _, b := range list {
		m := b.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

// scrape reads /metrics and returns every sample, keyed by the metric name
// with its labels as the text format writes them.
func scrape(t *testing.T, admin string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// sumOf adds the samples of a metric whose labels contain every one of
// labels (written name="value").
func sumOf(samples map[string]float64, metric string, labels ...string) float64 {
	var n float64
	for k, v := range samples {
		if k != metric && !strings.HasPrefix(k, metric+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(k, l)
		}
		if ok {
			n += v
		}
	}
	return n
}

// TestMetricsCountRelayAsAWhole sends a known number of requests through
// relay, with one serving process and with two, and requires /metrics to
// count exactly those, by method and status class, summed over processes.
func TestMetricsCountRelayAsAWhole(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		bs := make([]*backendServer, 3)
		for i := range bs {
			bs[i] = newBackend(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/no-such-page" {
						http.NotFound(w, r)
						return
					}
					h.ServeHTTP(w, r)
				})
			})
		}
		_, started := startRelay(t, "", "-config", writeConfig(t, fmt.Sprintf("processes: %d\naccess_log: false\n", processes)+backendsYAML(urlsOf(bs))))
		r := &relay{addr: "127.0.0.1:" + portOf(t, started.Str("listen"))}
		admin := adminOf(t, started)
		const gets, posts, missing = 240, 60, 30
		send := func(n int, method, path string, want int) {
			for range n {
				// A new connection for each: the kernel spreads them
				// over the processes.
				c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
				req, _ := http.NewRequest(method, r.url(path), strings.NewReader(strings.Repeat("x", 10)))
				if method == "GET" {
					req.Body, req.ContentLength = nil, 0
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Fatalf("%s %s: %d, want %d", method, path, resp.StatusCode, want)
				}
			}
		}
		send(gets, "GET", "/", 200)
		send(posts, "POST", "/echo", 200)
		send(missing, "GET", "/no-such-page", 404)
		m := scrape(t, admin)
		total := sumOf(m, "relay_requests_total")
		if total != gets+posts+missing {
			t.Fatalf("relay_requests_total sums to %v, want exactly %d", total, gets+posts+missing)
		}
		for _, c := range []struct {
			labels []string
			want   float64
		}{
			{[]string{`method="GET"`, `code="2xx"`}, gets},
			{[]string{`method="POST"`, `code="2xx"`}, posts},
			{[]string{`method="GET"`, `code="4xx"`}, missing},
			{[]string{`backend="none"`}, 0},
		} {
			if got := sumOf(m, "relay_requests_total", c.labels...); got != c.want {
				t.Errorf("relay_requests_total%v = %v, want %v", c.labels, got, c.want)
			}
		}
		// Every backend series names its pool: the file's top level is
		// the pool named default.
		if got := sumOf(m, "relay_requests_total", `pool="default"`); got != gets+posts+missing {
			t.Errorf(`relay_requests_total{pool="default"} = %v, want %d`, got, gets+posts+missing)
		}
		if got := sumOf(m, "relay_backend_attempts_total", `pool="default"`); got != gets+posts+missing {
			t.Errorf(`relay_backend_attempts_total{pool="default"} = %v, want %d`, got, gets+posts+missing)
		}
		if got := sumOf(m, "relay_request_duration_seconds_count"); got != gets+posts+missing {
			t.Errorf("relay_request_duration_seconds_count = %v, want %d", got, gets+posts+missing)
		}
		if got := sumOf(m, "relay_received_body_bytes_total"); got != posts*10 {
			t.Errorf("relay_received_body_bytes_total = %v, want %d", got, posts*10)
		}
		if got := sumOf(m, "relay_client_connections_accepted_total"); got != gets+posts+missing {
			t.Errorf("relay_client_connections_accepted_total = %v, want %d", got, gets+posts+missing)
		}
		for _, b := range bs {
			if got := m[`relay_backend_up{backend="`+b.url+`",pool="default"}`]; got != 1 {
				t.Errorf("relay_backend_up for %s = %v, want 1", b.url, got)
			}
			if got := sumOf(m, "relay_health_checks_total", `backend="`+b.url+`"`, `result="pass"`); got < 1 {
				t.Errorf("relay_health_checks_total pass for %s = %v, want at least the first check", b.url, got)
			}
		}
		if got := sumOf(m, "relay_serving_processes"); got != float64(processes) {
			t.Errorf("relay_serving_processes = %v, want %d", got, processes)
		}
		if got := sumOf(m, "relay_build_info", `goversion="go`); got != 1 {
			t.Errorf("relay_build_info with the Go version missing: %v", got)
		}
		// A counter never goes backwards between scrapes.
		if again := sumOf(scrape(t, admin), "relay_requests_total"); again != total {
			t.Errorf("a second scrape counts %v, want %v", again, total)
		}
	})
}

// portOf is the port of a host:port.
func portOf(t *testing.T, hostport string) string {
	t.Helper()
	i := strings.LastIndexByte(hostport, ':')
	if i < 0 {
		t.Fatalf("%q has no port", hostport)
	}
	return hostport[i+1:]
}

// TestAdminPathsOnTheClientPortGoToBackends: /metrics, /api and /healthz
// exist only on the admin listener; on the client port they are paths
// like any other, answered by a backend.
func TestAdminPathsOnTheClientPortGoToBackends(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 8)
	b := newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/health" {
				seen <- r.URL.Path
			}
			h.ServeHTTP(w, r)
		})
	})
	r, _ := startRelay(t, "", "-config", writeConfig(t, backendsYAML([]string{b.url})))
	c := newClient(t)
	for _, path := range []string{"/metrics", "/api/backends", "/healthz", "/readyz", "/debug/pprof/"} {
		get(t, c, r.url(path))
		select {
		case got := <-seen:
			if got != path {
				t.Fatalf("backend saw %q, want %q", got, path)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s on the client port never reached the backend", path)
		}
	}
}

// TestAdminAPISteersEveryProcess drains, enables, reweighs, adds and
// removes backends through the admin API of a relay with two serving
// processes, and checks each change in the traffic itself.
func TestAdminAPISteersEveryProcess(t *testing.T) {
	t.Parallel()
	bs := newBackends(t, 3)
	extra := newBackend(t, nil)
	_, started := startRelay(t, "", "-config", writeConfig(t, "processes: 2\naccess_log: false\nalgorithm: weighted-round-robin\n"+backendsYAML(urlsOf(bs))))
	r := &relay{addr: "127.0.0.1:" + portOf(t, started.Str("listen"))}
	admin := adminOf(t, started)
	// answers sends n requests on new connections (so both processes
	// serve) and counts the answers by greeting.
	answers := func(n int) map[string]int {
		got := map[string]int{}
		for range n {
			c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
			code, body := get(t, c, r.url("/"))
			if code != 200 {
				t.Fatalf("GET /: %d %q", code, body)
			}
			got[body]++
		}
		return got
	}
	victim := bs[1]
	esc := url.PathEscape(victim.url)

	code, v := adminCall(t, admin, "POST", "/api/backends/"+esc+"/drain", "")
	if code != 200 || v["draining"] != true {
		t.Fatalf("drain: %d %v", code, v)
	}
	if got := answers(60); got[victim.hello] != 0 || len(got) != 2 {
		t.Fatalf("after the drain %v; want no answer from the drained backend", got)
	}
	if b := backendsOf(t, admin)[victim.url]; b["state"] != "drained" || b["in_rotation"] != false {
		t.Fatalf("drained backend listed as %v", b)
	}
	// host:port designates a backend too.
	if code, v := adminCall(t, admin, "POST", "/api/backends/127.0.0.1:"+victim.port+"/enable", ""); code != 200 || v["state"] != "up" {
		t.Fatalf("enable: %d %v", code, v)
	}
	if got := answers(60); got[victim.hello] == 0 {
		t.Fatalf("after enable %v; want the backend back in rotation", got)
	}

	if code, v := adminCall(t, admin, "POST", "/api/backends/"+esc+"/weight", `{"weight": 5}`); code != 200 || v["weight"] != 5.0 || v["configured_weight"] != 5.0 {
		t.Fatalf("weight: %d %v", code, v)
	}
	if got := answers(70); got[victim.hello] < 35 {
		t.Fatalf("with weight 5 of 7 the backend answered %d of 70 (%v)", got[victim.hello], got)
	}

	code, v = adminCall(t, admin, "POST", "/api/backends", `{"url": "`+extra.url+`"}`)
	if code != 201 || v["name"] != extra.url {
		t.Fatalf("add: %d %v", code, v)
	}
	deadline := time.Now().Add(5 * time.Second)
	for answers(20)[extra.hello] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the added backend took no traffic within 5 s")
		}
	}
	if code, v := adminCall(t, admin, "DELETE", "/api/backends/"+url.PathEscape(extra.url), ""); code != 200 || v["state"] != "removed" {
		t.Fatalf("remove: %d %v", code, v)
	}
	if got := answers(40); got[extra.hello] != 0 {
		t.Fatalf("after removal %v; want nothing from the removed backend", got)
	}
	if _, ok := backendsOf(t, admin)[extra.url]; ok {
		t.Fatal("the removed backend is still listed")
	}

	// Bad calls: a JSON error naming what is wrong, nothing changed.
	for _, c := range []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"POST", "/api/backends/no-such:1/drain", "", 404, "no such backend"},
		{"POST", "/api/backends/" + esc + "/weight", `{"weight": 0}`, 400, "weight 0 is outside 1..1000"},
		{"POST", "/api/backends/" + esc + "/weight", `{"wieght": 2}`, 400, `unknown field "wieght"`},
		{"POST", "/api/backends/" + esc + "/explode", "", 404, "unknown action"},
		{"POST", "/api/backends", `{"url": "localhost:9"}`, 400, `has no scheme`},
		{"POST", "/api/backends", `{"url": "` + bs[0].url + `"}`, 409, `in pool "default" already`},
		{"GET", "/api/nothing", "", 404, "no admin endpoint"},
	} {
		code, v := adminCall(t, admin, c.method, c.path, c.body)
		if msg, _ := v["error"].(string); code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s %s %s: %d %v; want %d with an error containing %q", c.method, c.path, c.body, code, v, c.code, c.msg)
		}
	}
	if n := len(backendsOf(t, admin)); n != 3 {
		t.Fatalf("after the bad calls %d backends are listed, want 3", n)
	}
}

// TestHealthzAndReadyz: /healthz says relay is alive; /readyz answers 503
// while no backend is in rotation and 200 once one is.
func TestHealthzAndReadyz(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	b.health.SetFailing(true)
	_, started := startRelay(t, "", "-config", writeConfig(t, "health_check_interval: 200ms\nhealth_check_timeout: 100ms\nhealth_check_rise: 1\n"+backendsYAML([]string{b.url})))
	admin := adminOf(t, started)
	if code, v := adminCall(t, admin, "GET", "/healthz", ""); code != 200 || v["status"] != "ok" {
		t.Fatalf("/healthz: %d %v", code, v)
	}
	if code, v := adminCall(t, admin, "GET", "/readyz", ""); code != 503 || v["error"] != "no backend in rotation" {
		t.Fatalf("/readyz with the only backend down: %d %v", code, v)
	}
	b.health.SetFailing(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, v := adminCall(t, admin, "GET", "/readyz", "")
		if code == 200 && v["in_rotation"] == 1.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz once the backend passes: %d %v", code, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get(admin + "/debug/pprof/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/debug/pprof/: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestAdminTokenGuardsEveryEndpoint: with admin_token set, an admin
// listener beyond loopback answers 401 without the bearer token.
func TestAdminTokenGuardsEveryEndpoint(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	const token = "s3cret-token-0123456789"
	_, started := startRelay(t, "", "-admin-listen", "0.0.0.0:0", "-config",
		writeConfig(t, "admin_token: "+token+"\n"+backendsYAML([]string{b.url})))
	admin := "http://127.0.0.1:" + portOf(t, started.Str("admin"))
	for _, path := range []string{"/metrics", "/api/backends", "/healthz"} {
		resp, err := http.Get(admin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("GET %s without the token: %d, want 401", path, resp.StatusCode)
		}
		req, _ := http.NewRequest("GET", admin+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s with the token: %d, want 200", path, resp.StatusCode)
		}
	}
	code, _, stderr := runRelay(t, "-admin-listen", "0.0.0.0:0", "-config", writeConfig(t, backendsYAML([]string{b.url})))
	if code != 1 || !strings.Contains(stderr, "needs admin_token") {
		t.Fatalf("beyond loopback without a token: exit %d, stderr %q", code, stderr)
	}
}

// TestAdminRefusesOtherSitesAndNames: relay's admin listener, on loopback
// without a token, answers its own address and the names admin_allowed_hosts
// lists; a Host naming anything else gets 421 (DNS rebinding), another
// page's Origin 403, and a change that does not say it is JSON 415; none of
// them changes anything.
func TestAdminRefusesOtherSitesAndNames(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	_, started := startRelay(t, "", "-config", writeConfig(t, "admin_allowed_hosts: [relay-admin.test]\n"+backendsYAML([]string{b.url})))
	admin := adminOf(t, started)
	port := portOf(t, started.Str("admin"))
	drain := "/api/backends/" + url.PathEscape(b.url) + "/drain"
	send := func(method, path, host string, header ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, admin+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		msg, _ := v["error"].(string)
		return resp.StatusCode, msg
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "relay-admin.test:" + port} {
		if code, msg := send("GET", "/api/backends", host); code != 200 {
			t.Errorf("GET /api/backends with Host %s: %d %s", host, code, msg)
		}
	}
	for _, c := range []struct {
		method, path, host string
		header             []string
		code               int
		msg                string
	}{
		{"GET", "/api/backends", "attacker.test:" + port, nil, 421, `Host "attacker.test:` + port + `" does not name this admin listener`},
		{"GET", "/metrics", "attacker.test:" + port, nil, 421, "admin_allowed_hosts"},
		{"GET", "/healthz", "attacker.test", nil, 421, "Use the listener's address (localhost:" + port + ")"},
		{"POST", drain, "attacker.test:" + port, []string{"Content-Type", "application/json"}, 421, "DNS rebinding"},
		{"POST", drain, "127.0.0.1:" + port, []string{"Content-Type", "application/json", "Origin", "http://127.0.0.1:8000"}, 403, "web pages on other origins"},
		{"POST", drain, "127.0.0.1:" + port, []string{"Content-Type", "application/json", "Sec-Fetch-Site", "same-site"}, 403, "web pages on other origins"},
		{"OPTIONS", drain, "127.0.0.1:" + port, []string{"Origin", "http://attacker.test"}, 403, "no CORS preflight"},
		{"POST", drain, "127.0.0.1:" + port, nil, 415, "needs Content-Type: application/json"},
		{"POST", drain, "127.0.0.1:" + port, []string{"Content-Type", "text/plain"}, 415, `got "text/plain"`},
		{"POST", "/reload", "127.0.0.1:" + port, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "-H 'Content-Type: application/json'"},
	} {
		if code, msg := send(c.method, c.path, c.host, c.header...); code != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s %s Host %s %q: %d %q; want %d with %q", c.method, c.path, c.host, c.header, code, msg, c.code, c.msg)
		}
	}
	if v := backendsOf(t, admin)[b.url]; v["state"] != "up" {
		t.Fatalf("after the refused calls the backend is %v; want up", v["state"])
	}
	if code, v := adminCall(t, admin, "POST", drain, ""); code != 200 || v["draining"] != true {
		t.Fatalf("drain with Content-Type: application/json: %d %v", code, v)
	}
}
