package ui

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"relay/internal/browser"
)

// ------------------------------------------------------------------------
// The handler, without a browser.

func TestHandlerServesThePageAndItsAssets(t *testing.T) {
	h := Handler()
	for _, tt := range []struct{ path, file, contentType string }{
		{"/", "index.html", "text/html; charset=utf-8"},
		{"/ui/app.js", "app.js", "text/javascript; charset=utf-8"},
		{"/ui/style.css", "style.css", "text/css; charset=utf-8"},
		{"/ui/favicon.svg", "favicon.svg", "image/svg+xml"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", tt.path, rec.Code)
			continue
		}
		hdr := rec.Header()
		for name, want := range map[string]string{
			"Content-Type":            tt.contentType,
			"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
			"Cache-Control":           "no-cache",
			"X-Content-Type-Options":  "nosniff",
		} {
			if got := hdr.Get(name); got != want {
				t.Errorf("GET %s: %s %q, want %q", tt.path, name, got, want)
			}
		}
		want, err := files.ReadFile(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Body.String() != string(want) {
			t.Errorf("GET %s: body is not %s", tt.path, tt.file)
		}

		// no-cache means "ask again", which is cheap with the ETag.
		etag := hdr.Get("ETag")
		if etag == "" {
			t.Errorf("GET %s: no ETag", tt.path)
			continue
		}
		req := httptest.NewRequest("GET", tt.path, nil)
		req.Header.Set("If-None-Match", etag)
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
			t.Errorf("GET %s If-None-Match its ETag: %d with %d bytes, want 304 and none", tt.path, rec.Code, rec.Body.Len())
		}
	}
}

func TestHandlerServesNothingElse(t *testing.T) {
	h := Handler()
	for _, path := range []string{
		"/index.html", "/ui/", "/ui", "/ui/index.html", "/ui/ui.go", "/ui/ui_test.go",
		"/ui/../ui.go", "/ui/app.js/", "/ui/APP.JS", "/favicon.ico", "/api/backends", "/x/ui/app.js",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, rec.Code)
		}
	}
	for _, method := range []string{"POST", "PUT", "DELETE"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, "/", nil))
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("%s /: %d, want 405", method, rec.Code)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("HEAD", "/ui/app.js", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") == "" {
		t.Errorf("HEAD /ui/app.js: %d, %d bytes, Content-Type %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Type"))
	}
}

// The page must work under its own policy (no inline script, style or
// handler) and must load only what Handler serves.
func TestPageNeedsOnlyWhatIsServed(t *testing.T) {
	page, err := files.ReadFile("index.html")
	if err != nil {
		t.Fatal(err)
	}
	h := Handler()
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(string(page), -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references only %q", refs)
	}
	for _, m := range refs {
		ref := m[1]
		if ref == "/api/pools" || ref == "/metrics" {
			continue // links to the admin API beside the page, not loaded by it
		}
		if !strings.HasPrefix(ref, "/ui/") {
			t.Errorf("index.html loads %q, which is not one of the page's own assets", ref)
			continue
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", ref, nil))
		if rec.Code != http.StatusOK {
			t.Errorf("index.html loads %s, which answers %d", ref, rec.Code)
		}
	}
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script>|<script [^>]*>[^<]`), // inline script
		regexp.MustCompile(`<style`),                      // inline style sheet
		regexp.MustCompile(`\sstyle=`),                    // style attribute
		regexp.MustCompile(`\son[a-z]+=`),                 // event handler attribute
		regexp.MustCompile(`https?://[^"]*\.(js|css|woff2?)`),
	} {
		if loc := bad.FindIndex(page); loc != nil {
			t.Errorf("index.html has %q, which the policy refuses or which needs the network", page[loc[0]:loc[1]])
		}
	}
	js, err := files.ReadFile("app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "eval(", "new Function", ".style.", "setAttribute(\"style\""} {
		if strings.Contains(string(js), bad) {
			t.Errorf("app.js uses %s, which the policy refuses or which invites injection", bad)
		}
	}
}

// ------------------------------------------------------------------------
// A fake admin API: GET /api/pools and the drain and enable actions of
// a pool's backend, as internal/admin answers them.

// traffic is what a backend serves between two polls of the fake.
type traffic struct {
	requests, errors uint64                  // errors are answered 5xx, the rest 2xx
	latency          [len(bounds) + 1]uint64 // per bucket, not cumulative
	seconds          float64                 // their latencies summed
}

var bounds = [...]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

type counts struct {
	requests  uint64
	responses [5]uint64
	buckets   [len(bounds) + 1]uint64
	seconds   float64
}

func (c *counts) add(tr traffic) {
	c.requests += tr.requests
	c.responses[1] += tr.requests - tr.errors
	c.responses[4] += tr.errors
	for i, n := range tr.latency {
		c.buckets[i] += n
	}
	c.seconds += tr.seconds
}

func (c *counts) json() map[string]any {
	cum := make([]uint64, len(c.buckets))
	var sum uint64
	for i, n := range c.buckets {
		sum += n
		cum[i] = sum
	}
	return map[string]any{
		"requests": c.requests,
		"responses": map[string]uint64{
			"1xx": c.responses[0], "2xx": c.responses[1], "3xx": c.responses[2], "4xx": c.responses[3], "5xx": c.responses[4],
		},
		"latency":   map[string]any{"bounds": bounds, "counts": cum, "sum_seconds": c.seconds},
		"bytes_in":  c.requests * 100,
		"bytes_out": c.requests * 2000,
	}
}

type fakeBackend struct {
	pool                        string // "" is the default pool
	name                        string
	weight, configuredWeight    int
	state, breaker              string
	healthy                     bool
	draining, drained, disabled bool
	ejectedUntil                time.Time
	inFlight                    int64
	perPoll                     func(poll int) traffic
	counts
	grpc map[string]uint64 // gRPC responses by grpc-status, as the API counts them
}

func (b *fakeBackend) inRotation() bool {
	return b.healthy && b.breaker == "closed" && !b.draining && !b.disabled
}

func (b *fakeBackend) json() map[string]any {
	m := b.counts.json()
	m["name"] = b.name
	m["weight"] = b.weight
	m["configured_weight"] = b.configuredWeight
	m["in_rotation"] = b.inRotation()
	m["state"] = b.state
	m["healthy"] = b.healthy
	m["breaker"] = b.breaker
	if !b.ejectedUntil.IsZero() {
		m["ejected_until"] = b.ejectedUntil.Format(time.RFC3339Nano)
	}
	m["draining"] = b.draining
	m["drained"] = b.drained
	m["disabled"] = b.disabled
	m["in_flight"] = b.inFlight
	m["failures"] = b.responses[4]
	m["grpc"] = grpcJSON(b.grpc)
	return m
}

// grpcJSON is gRPC counts as the API shows them: {} for none.
func grpcJSON(g map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, n := range g {
		out[k] = n
	}
	return out
}

type fakeAPI struct {
	mu       sync.Mutex
	now      time.Time     // the fake's clock, which the page measures rates by
	step     time.Duration // how far the clock moves at each poll
	polls    int
	backends []*fakeBackend
	retries  uint64
	token    string            // wanted in Authorization when not ""
	fail     bool              // polls get their connection closed
	refuse   map[string]string // "drain NAME" -> the error the API answers
	actions  []string          // "drain NAME" for each action received
	paths    []string          // their paths, as sent (escaped)
	auth     []string          // Authorization of every request
	// ownGRPC are relay's own gRPC answers, by pool and grpc-status.
	ownGRPC map[string]map[string]uint64
}

// constant is a traffic that is the same at every poll.
func constant(tr traffic) func(int) traffic { return func(int) traffic { return tr } }

func none(int) traffic { return traffic{} }

// standardBackends are four backends in four states; the first two serve
// traffic whose rates and percentiles are known (see TestDashboardComputesRates).
func standardBackends(now time.Time) []*fakeBackend {
	var fast, slow traffic
	fast.requests, fast.errors = 500, 50
	fast.latency[2], fast.latency[3] = 250, 250 // (1ms, 2.5ms] and (2.5ms, 5ms]
	fast.seconds = 250*0.002 + 250*0.004
	slow.requests = 80
	slow.latency[5] = 80 // (10ms, 25ms]
	slow.seconds = 80 * 0.015
	return []*fakeBackend{
		{name: "http://127.0.0.1:8001", weight: 1, configuredWeight: 1, state: "up", breaker: "closed", healthy: true, inFlight: 3, perPoll: constant(fast)},
		{name: "http://127.0.0.1:8002", weight: 2, configuredWeight: 1, state: "up", breaker: "closed", healthy: true, inFlight: 1, perPoll: constant(slow)},
		{name: "http://127.0.0.1:8003", weight: 1, configuredWeight: 1, state: "ejected", breaker: "open", healthy: true, ejectedUntil: now.Add(30 * time.Second), perPoll: none},
		{name: "http://10.0.0.7:9000", weight: 1, configuredWeight: 1, state: "disabled", breaker: "closed", healthy: true, disabled: true, perPoll: none},
	}
}

func newFake(step time.Duration) *fakeAPI {
	now := time.Date(2026, 11, 25, 2, 40, 0, 123456789, time.UTC)
	return &fakeAPI{now: now, step: step, backends: standardBackends(now), refuse: map[string]string{}}
}

func (f *fakeAPI) backend(name string) *fakeBackend { return f.member("default", name) }

// member is the backend named name in pool.
func (f *fakeAPI) member(pool, name string) *fakeBackend {
	for _, b := range f.backends {
		if b.poolName() == pool && b.name == name {
			return b
		}
	}
	return nil
}

func (b *fakeBackend) poolName() string {
	if b.pool == "" {
		return "default"
	}
	return b.pool
}

// update changes the fake under its lock.
func (f *fakeAPI) update(change func(f *fakeAPI)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

func (f *fakeAPI) get(read func(f *fakeAPI) bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return read(f)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// authorized records the request's Authorization and answers 401 when
// the fake wants a token it did not get.
func (f *fakeAPI) authorized(w http.ResponseWriter, r *http.Request) bool {
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	if f.token != "" && r.Header.Get("Authorization") != "Bearer "+f.token {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "admin token required"})
		return false
	}
	return true
}

func (f *fakeAPI) list(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		// What a relay that went away looks like to a browser: the
		// connection ends without an answer.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	if !f.authorized(w, r) {
		return
	}
	f.polls++
	f.now = f.now.Add(f.step)
	f.retries += 2
	// Each pool as GET /api/pools lists them, in the order of their
	// first backend; the first pool has the retries and the answers
	// without a backend.
	var order []string
	byPool := map[string][]*fakeBackend{}
	for _, b := range f.backends {
		b.add(b.perPoll(f.polls))
		if byPool[b.poolName()] == nil {
			order = append(order, b.poolName())
		}
		byPool[b.poolName()] = append(byPool[b.poolName()], b)
	}
	pools := []map[string]any{}
	for k, name := range order {
		var total counts
		var inFlight int64
		views := []map[string]any{}
		grpc := grpcJSON(f.ownGRPC[name])
		for _, b := range byPool[name] {
			for k, n := range b.grpc {
				grpc[k] += n
			}
			total.requests += b.requests
			for i := range total.responses {
				total.responses[i] += b.responses[i]
			}
			for i := range total.buckets {
				total.buckets[i] += b.buckets[i]
			}
			total.seconds += b.seconds
			inFlight += b.inFlight
			views = append(views, b.json())
		}
		totals := total.json()
		totals["in_flight"] = inFlight
		totals["connections_open"] = 12
		totals["connections_accepted"] = 100 + f.polls
		totals["retries"], totals["no_backend"] = uint64(0), 0
		if k == 0 {
			totals["retries"], totals["no_backend"] = f.retries, 7
		}
		totals["retry_budget_refusals"] = 0
		totals["grpc"], totals["no_backend_grpc"] = grpc, grpcJSON(f.ownGRPC[name])
		pools = append(pools, map[string]any{
			"pool": name, "algorithm": "round-robin", "generation": 3, "processes": 2, "queued": 0,
			"time":   f.now.Format(time.RFC3339Nano),
			"totals": totals, "backends": views,
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"generation": 3, "processes": 2, "time": f.now.Format(time.RFC3339Nano), "pools": pools,
	})
}

func (f *fakeAPI) action(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.authorized(w, r) {
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		// As relay does: a call that changes something must say it is
		// JSON, which a page on another site cannot send.
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "POST needs Content-Type: application/json, got " + strconv.Quote(ct)})
		return
	}
	name, action := r.PathValue("name"), r.PathValue("action")
	f.actions = append(f.actions, action+" "+name)
	f.paths = append(f.paths, r.URL.EscapedPath())
	b := f.member(r.PathValue("pool"), name)
	switch {
	case b == nil:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no backend " + name})
		return
	case f.refuse[action+" "+name] != "":
		writeJSON(w, http.StatusConflict, map[string]string{"error": f.refuse[action+" "+name]})
		return
	}
	switch action {
	case "drain":
		b.draining, b.state = true, "draining"
	case "enable":
		b.draining, b.drained, b.disabled, b.state = false, false, false, "up"
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no action " + action})
		return
	}
	writeJSON(w, http.StatusOK, b.json())
}

// serve starts the fake admin listener, with the dashboard, on the
// loopback address.
func (f *fakeAPI) serve(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", Handler())
	mux.Handle("GET /ui/", Handler())
	mux.HandleFunc("GET /api/pools", f.list)
	mux.HandleFunc("POST /api/pools/{pool}/backends/{name}/{action}", f.action)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// ------------------------------------------------------------------------
// The page, in Chromium.

// open starts a browser (after the server, so that it stops first) and
// loads the dashboard at url, waiting until it has shown at least polls
// polls.
func open(t *testing.T, url string, polls int) *browser.Browser {
	t.Helper()
	b := browser.New(t)
	if err := b.Run(chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	// A poll a second, and some slack for a slow start.
	if err := b.WaitFor(time.Duration(polls+10)*time.Second, fmt.Sprintf("%d polls shown", polls),
		fmt.Sprintf(`Number(document.body.dataset.polls || 0) >= %d`, polls)); err != nil {
		t.Fatalf("%v; errors in the page: %q", err, b.Errors())
	}
	return b
}

// js quotes s as a JavaScript string.
func js(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// cellExpr is the text of the first element matching sel in the row of
// the backend named name, or null.
func cellExpr(name, sel string) string {
	return fmt.Sprintf(`(() => {
		const tr = [...document.querySelectorAll("#backends tbody tr")].find((r) => r.dataset.backend === %s);
		const e = tr && tr.querySelector(%s);
		return e ? e.textContent : null;
	})()`, js(name), js(sel))
}

func waitCell(t *testing.T, b *browser.Browser, name, sel, want string) {
	t.Helper()
	err := b.WaitFor(5*time.Second, fmt.Sprintf("%s %s shows %q", name, sel, want), cellExpr(name, sel)+" === "+js(want))
	if err != nil {
		got, _ := browser.Eval[*string](b, cellExpr(name, sel))
		if got != nil {
			err = fmt.Errorf("%v; it shows %q", err, *got)
		}
		t.Fatal(err)
	}
}

// button is a CSS selector of the backend's button for action.
func button(name, action string) string {
	return fmt.Sprintf(`#backends tr[data-backend=%s] button[data-action=%s]`, strconv.Quote(name), strconv.Quote(action))
}

// noErrors fails t for each error the page reported, but those that
// contain one of expected (failures the test caused on purpose).
func noErrors(t *testing.T, b *browser.Browser, expected ...string) {
	t.Helper()
next:
	for _, e := range b.Errors() {
		for _, x := range expected {
			if strings.Contains(e, x) {
				continue next
			}
		}
		t.Errorf("the page reported: %s", e)
	}
}

func screenshot(t *testing.T, b *browser.Browser, name string) string {
	t.Helper()
	dir := os.Getenv("RELAY_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := b.Screenshot(path); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

func TestDashboardShowsEveryBackend(t *testing.T) {
	f := newFake(time.Second)
	srv := f.serve(t)
	b := open(t, srv.URL+"/", 2)

	for _, want := range []struct{ name, state, health, breaker, weight string }{
		{"http://127.0.0.1:8001", "up", "passing", "closed", "1"},
		{"http://127.0.0.1:8002", "up", "passing", "closed", "2 (1)"},
		{"http://127.0.0.1:8003", "ejected", "passing", "open", "1"},
		{"http://10.0.0.7:9000", "disabled", "passing", "closed", "1"},
	} {
		waitCell(t, b, want.name, "td.name", want.name)
		waitCell(t, b, want.name, ".badge", want.state)
		waitCell(t, b, want.name, "td.health", want.health)
		waitCell(t, b, want.name, "td.weight", want.weight)
		if got, err := browser.Eval[string](b, cellExpr(want.name, "td.breaker")); err != nil || !strings.HasPrefix(got, want.breaker) {
			t.Errorf("%s: breaker shows %q (%v), want %s…", want.name, got, err, want.breaker)
		}
	}
	n, err := browser.Eval[int](b, `document.querySelectorAll("#backends tbody tr[data-backend]").length`)
	if err != nil || n != 4 {
		t.Errorf("%d rows (%v), want 4", n, err)
	}
	// Only the disabled one can be enabled; it cannot be drained.
	for _, c := range []struct {
		name, action string
		disabled     bool
	}{
		{"http://127.0.0.1:8001", "drain", false},
		{"http://127.0.0.1:8001", "enable", true},
		{"http://10.0.0.7:9000", "drain", true},
		{"http://10.0.0.7:9000", "enable", false},
	} {
		got, err := browser.Eval[bool](b, fmt.Sprintf(`document.querySelector(%s).disabled`, js(button(c.name, c.action))))
		if err != nil || got != c.disabled {
			t.Errorf("%s %s button disabled = %v (%v), want %v", c.name, c.action, got, err, c.disabled)
		}
	}
	status, err := browser.Eval[string](b, `document.getElementById("status").textContent`)
	if err != nil || !strings.HasPrefix(status, "live") {
		t.Errorf("status %q (%v), want live…", status, err)
	}
	meta, err := browser.Eval[string](b, `document.getElementById("meta").textContent`)
	if err != nil || !strings.Contains(meta, "round-robin") || !strings.Contains(meta, "2 processes") {
		t.Errorf("header says %q (%v)", meta, err)
	}
	noErrors(t, b)
}

// TestDashboardGroupsBackendsByPool: each pool's backends sit under a row
// that names the pool, in the API's order; one address in two pools is a
// row in each, and a button acts on the pool of its row.
func TestDashboardGroupsBackendsByPool(t *testing.T) {
	f := newFake(time.Second)
	const shared = "http://127.0.0.1:8001"
	f.backends = append(f.backends[:2],
		&fakeBackend{pool: "api", name: shared, weight: 1, configuredWeight: 1, state: "up", breaker: "closed", healthy: true, perPoll: none},
		&fakeBackend{pool: "api", name: "http://127.0.0.1:9001", weight: 1, configuredWeight: 1, state: "up", breaker: "closed", healthy: true, perPoll: none})
	srv := f.serve(t)
	b := open(t, srv.URL+"/", 2)
	layout := `[...document.querySelectorAll("#backends tbody tr")].map((r) =>
		r.dataset.poolHead ? "# " + r.textContent : r.dataset.pool + " " + r.dataset.backend).join("\n")`
	want := strings.Join([]string{
		"# default round-robin · 2 of 2 in rotation",
		"default " + shared,
		"default http://127.0.0.1:8002",
		"# api round-robin · 2 of 2 in rotation",
		"api " + shared,
		"api http://127.0.0.1:9001",
	}, "\n")
	if err := b.WaitFor(5*time.Second, "both pools shown", layout+" === "+js(want)); err != nil {
		got, _ := browser.Eval[string](b, layout)
		t.Fatalf("%v; the table reads:\n%s", err, got)
	}
	meta, err := browser.Eval[string](b, `document.getElementById("meta").textContent`)
	if err != nil || !strings.HasPrefix(meta, "2 pools") {
		t.Errorf("header says %q (%v), want 2 pools first", meta, err)
	}
	drain := `#backends tr[data-pool="api"][data-backend="` + shared + `"] button[data-action="drain"]`
	if err := b.Run(chromedp.Click(chromedp.CSS(drain))); err != nil {
		t.Fatal(err)
	}
	badge := func(pool string) string {
		return `document.querySelector('#backends tr[data-pool="` + pool + `"][data-backend="` + shared + `"] .badge').textContent`
	}
	if err := b.WaitFor(5*time.Second, "api's member draining, default's up", badge("api")+` === "draining" && `+badge("default")+` === "up"`); err != nil {
		t.Error(err)
	}
	f.update(func(f *fakeAPI) {
		if want := "/api/pools/api/backends/http%3A%2F%2F127.0.0.1%3A8001/drain"; len(f.paths) != 1 || f.paths[0] != want {
			t.Errorf("the page posted to %q, want %s", f.paths, want)
		}
	})
	noErrors(t, b)
}

func TestDashboardComputesRates(t *testing.T) {
	// Two seconds of the fake's clock between polls: the page must divide
	// by the time between the polls, not by its own polling period.
	f := newFake(2 * time.Second)
	srv := f.serve(t)
	b := open(t, srv.URL+"/", 3)

	type shown struct {
		Polls                                    string
		RPS, Err, P50, P99, Retries, InFlight    string
		RPS1, Err1, P501, P991, RPS2, Err2, P502 string
		RPS3, Err3                               string
	}
	got, err := browser.Eval[shown](b, `(() => {
		const t = (id) => document.getElementById(id).textContent;
		const c = (name, sel) => [...document.querySelectorAll("#backends tbody tr")]
			.find((r) => r.dataset.backend === name).querySelector(sel).textContent;
		const a = "http://127.0.0.1:8001", b = "http://127.0.0.1:8002", e = "http://127.0.0.1:8003";
		return {
			Polls: document.body.dataset.polls,
			RPS: t("t-rps"), Err: t("t-err"), P50: t("t-p50"), P99: t("t-p99"),
			Retries: t("t-retries"), InFlight: t("t-inflight"),
			RPS1: c(a, ".rps .v"), Err1: c(a, "td.err"), P501: c(a, "td.p50"), P991: c(a, ".p99 .v"),
			RPS2: c(b, ".rps .v"), Err2: c(b, "td.err"), P502: c(b, "td.p50"),
			RPS3: c(e, ".rps .v"), Err3: c(e, "td.err"),
		};
	})()`)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after %s polls the page shows %+v", got.Polls, got)
	// Per poll, 2 s apart: backend 1 answers 500 requests, 50 of them 5xx,
	// 250 in (1ms, 2.5ms] and 250 in (2.5ms, 5ms]; backend 2 answers 80,
	// all in (10ms, 25ms]. So 250/s and 40/s, 10% and 0%, and by linear
	// interpolation within the buckets:
	//   backend 1 p50: rank 250 of 500, the top of (1ms, 2.5ms]: 2.5 ms
	//   backend 1 p99: rank 495, 245/250 into (2.5ms, 5ms]: 4.95 ms
	//   backend 2 p50: rank 40 of 80, halfway through (10ms, 25ms]: 17.5 ms
	//   total p50: rank 290 of 580, 40/250 into (2.5ms, 5ms]: 2.9 ms
	//   total p99: rank 574.2, 74.2/80 into (10ms, 25ms]: 23.9125 ms
	// and two retries a poll make 1 a second.
	for _, c := range []struct{ what, got, want string }{
		{"total requests/s", got.RPS, "290"},
		{"total error rate", got.Err, "8.6%"}, // 50 of 580
		{"total p50", got.P50, "2.90 ms"},
		{"total p99", got.P99, "23.9 ms"},
		{"retries/s", got.Retries, "1.0"},
		{"in flight", got.InFlight, "4"},
		{"8001 requests/s", got.RPS1, "250"},
		{"8001 errors", got.Err1, "10.0%"},
		{"8001 p50", got.P501, "2.50 ms"},
		{"8001 p99", got.P991, "4.95 ms"},
		{"8002 requests/s", got.RPS2, "40"},
		{"8002 errors", got.Err2, "0%"},
		{"8002 p50", got.P502, "17.5 ms"},
		{"8003 requests/s", got.RPS3, "0"},
		{"8003 errors", got.Err3, "–"}, // no requests, so no share
	} {
		if c.got != c.want {
			t.Errorf("%s: shown %q, want %q", c.what, c.got, c.want)
		}
	}
	noErrors(t, b)
}

// histogramQuantile must agree with Prometheus's histogram_quantile on
// the cases that differ from plain interpolation.
func TestHistogramQuantileInThePage(t *testing.T) {
	f := newFake(time.Second)
	srv := f.serve(t)
	b := open(t, srv.URL+"/", 1)
	for _, c := range []struct {
		expr string
		want *float64
	}{
		{"histogramQuantile(0.5, [1, 2, 4], [0, 10, 10, 10])", ptr(1.5)},    // within (1, 2]
		{"histogramQuantile(0.99, [1, 2, 4], [10, 10, 10, 10])", ptr(0.99)}, // the first bucket starts at 0
		{"histogramQuantile(0.75, [1, 2, 4], [0, 0, 4, 4])", ptr(3.5)},      // 3/4 into (2, 4]
		{"histogramQuantile(0.99, [1, 2, 4], [0, 0, 0, 10])", ptr(4)},       // in +Inf: the highest bound
		{"histogramQuantile(0.5, [1, 2, 4], [0, 0, 0, 0])", nil},            // nothing counted
		{"histogramQuantile(0.5, [1, 2, 4], [1, 2, 3])", nil},               // malformed
	} {
		got, err := browser.Eval[*float64](b, c.expr)
		switch {
		case err != nil:
			t.Errorf("%s: %v", c.expr, err)
		case c.want == nil && got != nil:
			t.Errorf("%s = %v, want null", c.expr, *got)
		case c.want != nil && got == nil:
			t.Errorf("%s = null, want %v", c.expr, *c.want)
		case c.want != nil && (*got < *c.want-1e-9 || *got > *c.want+1e-9):
			t.Errorf("%s = %v, want %v", c.expr, *got, *c.want)
		}
	}
	noErrors(t, b)
}

func ptr(v float64) *float64 { return &v }

func TestDashboardShowsABackendGoingDown(t *testing.T) {
	f := newFake(time.Second)
	srv := f.serve(t)
	b := open(t, srv.URL+"/", 2)
	const name = "http://127.0.0.1:8002"
	waitCell(t, b, name, ".badge", "up")
	f.update(func(f *fakeAPI) {
		be := f.backend(name)
		be.healthy, be.state = false, "down"
	})
	waitCell(t, b, name, ".badge", "down")
	waitCell(t, b, name, "td.health", "failing")
	if err := b.WaitFor(3*time.Second, "1 of 4 in rotation",
		`document.getElementById("rotation").textContent === "1 of 4 in rotation"`); err != nil {
		t.Error(err)
	}
	// And back.
	f.update(func(f *fakeAPI) {
		be := f.backend(name)
		be.healthy, be.state = true, "up"
	})
	waitCell(t, b, name, ".badge", "up")
	noErrors(t, b)
}

func TestDashboardDrainsAndEnables(t *testing.T) {
	f := newFake(time.Second)
	f.token = "s3cret"
	srv := f.serve(t)
	b := open(t, srv.URL+"/#token=s3cret", 2)
	const name = "http://127.0.0.1:8002"

	if err := b.Run(chromedp.Click(chromedp.CSS(button(name, "drain")))); err != nil {
		t.Fatal(err)
	}
	waitCell(t, b, name, ".badge", "draining")
	f.update(func(f *fakeAPI) {
		if len(f.actions) != 1 || f.actions[0] != "drain "+name {
			t.Errorf("the API got %q, want one drain of %s", f.actions, name)
		}
		if want := "/api/pools/default/backends/http%3A%2F%2F127.0.0.1%3A8002/drain"; len(f.paths) != 1 || f.paths[0] != want {
			t.Errorf("the page posted to %q, want %s", f.paths, want)
		}
	})
	if err := b.WaitFor(3*time.Second, "Enable offered and Drain not",
		fmt.Sprintf(`!document.querySelector(%s).disabled && document.querySelector(%s).disabled`,
			js(button(name, "enable")), js(button(name, "drain")))); err != nil {
		t.Error(err)
	}

	if err := b.Run(chromedp.Click(chromedp.CSS(button(name, "enable")))); err != nil {
		t.Fatal(err)
	}
	waitCell(t, b, name, ".badge", "up")
	f.update(func(f *fakeAPI) {
		if len(f.actions) != 2 || f.actions[1] != "enable "+name {
			t.Errorf("the API got %q, want a drain and an enable of %s", f.actions, name)
		}
		for _, a := range f.auth {
			if a != "Bearer s3cret" {
				t.Errorf("a request had Authorization %q, want the token from the address", a)
				break
			}
		}
	})
	noErrors(t, b)
}

func TestDashboardShowsTheAPIsError(t *testing.T) {
	f := newFake(time.Second)
	const name = "http://127.0.0.1:8001"
	const refusal = "cannot drain the last backend in rotation"
	f.refuse["drain "+name] = refusal
	srv := f.serve(t)
	b := open(t, srv.URL+"/", 2)

	if err := b.Run(chromedp.Click(chromedp.CSS(button(name, "drain")))); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(5*time.Second, "the refusal shown",
		`!document.getElementById("error").hidden && document.getElementById("error").offsetHeight > 0 &&
		 document.getElementById("error-text").textContent.includes(`+js(refusal)+`)`); err != nil {
		t.Fatal(err)
	}
	text, _ := browser.Eval[string](b, `document.getElementById("error-text").textContent`)
	if !strings.Contains(text, name) || !strings.Contains(text, "409") {
		t.Errorf("the error says %q; it should name the backend and the status", text)
	}
	screenshot(t, b, "dashboard-error.png")
	waitCell(t, b, name, ".badge", "up")

	// Dismissing it hides it.
	if err := b.Run(chromedp.Click(chromedp.ID("error-dismiss"))); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitFor(3*time.Second, "the error dismissed", `document.getElementById("error").hidden`); err != nil {
		t.Error(err)
	}
	// The browser itself logs the 409 of the refused POST.
	noErrors(t, b, "/drain")
}

func TestDashboardShowsRelayUnreachable(t *testing.T) {
	f := newFake(time.Second)
	srv := f.serve(t)
	b := open(t, srv.URL+"/", 2)

	f.update(func(f *fakeAPI) { f.fail = true })
	if err := b.WaitFor(6*time.Second, "relay unreachable shown",
		`document.getElementById("status").textContent === "relay unreachable" &&
		 !document.getElementById("unreachable").hidden &&
		 document.getElementById("unreachable").textContent.startsWith("relay unreachable") &&
		 document.body.classList.contains("stale")`); err != nil {
		t.Fatal(err)
	}
	screenshot(t, b, "dashboard-unreachable.png")

	polls, _ := browser.Eval[string](b, `document.body.dataset.polls`)
	f.update(func(f *fakeAPI) { f.fail = false })
	if err := b.WaitFor(6*time.Second, "live again",
		`document.getElementById("status").textContent.startsWith("live") &&
		 document.getElementById("unreachable").hidden && !document.body.classList.contains("stale") &&
		 document.body.dataset.polls !== `+js(polls)); err != nil {
		t.Fatal(err)
	}
	// The browser logs the failed polls itself.
	noErrors(t, b, "/api/pools")
}

// TestDashboardScreenshot lets the charts fill with traffic that moves,
// checks they drew something, and leaves pictures of the page at 1366 and
// 1920 pixels wide to look at.
func TestDashboardScreenshot(t *testing.T) {
	// Five seconds of the fake's clock a poll: a minute of history in
	// twelve polls.
	f := newFake(5 * time.Second)
	wave := func(base, swing float64, phase int, errs float64) func(int) traffic {
		return func(poll int) traffic {
			// A made-up but plausible minute: a slow swell, one spike.
			k := float64((poll+phase)%12) / 12
			level := base * (1 + swing*(k*(1-k)*4-0.5))
			if poll == 8 {
				level *= 1.6
			}
			n := uint64(level * 5)
			var tr traffic
			tr.requests, tr.errors = n, uint64(float64(n)*errs)
			tr.latency[2] = n / 4
			tr.latency[3] = n / 2
			tr.latency[4] = n / 5
			tr.latency[6] = uint64(float64(n) * (0.004 + 0.03*k*k)) // a tail that comes and goes
			tr.latency[5] = n - tr.latency[2] - tr.latency[3] - tr.latency[4] - tr.latency[6]
			tr.seconds = float64(n) * 0.005
			return tr
		}
	}
	f.update(func(f *fakeAPI) {
		f.backends[0].perPoll = wave(420, 0.6, 0, 0.002)
		f.backends[1].perPoll = wave(180, 0.8, 5, 0)
		// One that a colleague started to drain, and one with a failing check.
		f.backends = append(f.backends,
			&fakeBackend{name: "http://127.0.0.1:8004", weight: 1, configuredWeight: 1, state: "draining", breaker: "closed",
				healthy: true, draining: true, inFlight: 2, perPoll: wave(60, 0.3, 2, 0)},
			&fakeBackend{name: "http://127.0.0.1:8005", weight: 1, configuredWeight: 1, state: "down", breaker: "closed",
				perPoll: none})
	})
	srv := f.serve(t)
	b := open(t, srv.URL+"/", 13)

	for _, sel := range []string{"#chart-rps path.line", "#chart-p99 path.line",
		`#backends tr[data-backend="http://127.0.0.1:8001"] svg.rps path.line`,
		`#backends tr[data-backend="http://127.0.0.1:8001"] svg.p99 path.line`} {
		// Ten or more points: a line across most of the minute.
		d, err := browser.Eval[string](b, fmt.Sprintf(`document.querySelector(%s).getAttribute("d")`, js(sel)))
		if err != nil || strings.Count(d, "L") < 10 {
			t.Errorf("%s: d=%q (%v), want a line of ten points or more", sel, d, err)
		}
	}
	// Nothing overflows the laptop screen sideways, the table (which
	// would scroll within its frame) included.
	if w, err := browser.Eval[int](b, `document.documentElement.scrollWidth`); err != nil || w > browser.Width {
		t.Errorf("the page is %d pixels wide (%v) in a %d pixel window", w, err, browser.Width)
	}
	if over, err := browser.Eval[int](b, `(() => {
		const w = document.querySelector(".table-wrap");
		return w.scrollWidth - w.clientWidth;
	})()`); err != nil || over > 0 {
		t.Errorf("the backends table is %d pixels (%v) wider than its frame", over, err)
	}
	screenshot(t, b, "dashboard-1366.png")
	if err := b.Run(chromedp.EmulateViewport(1920, 1080)); err != nil {
		t.Fatal(err)
	}
	screenshot(t, b, "dashboard-1920.png")
	noErrors(t, b)
}

// The fake's own plumbing: a poll that fails must look like relay gone.
func TestFakeFailsLikeAGoneRelay(t *testing.T) {
	f := newFake(time.Second)
	srv := f.serve(t)
	f.update(func(f *fakeAPI) { f.fail = true })
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(srv.URL + "/api/pools")
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t.Fatalf("a failing poll answered %s", resp.Status)
	}
}
