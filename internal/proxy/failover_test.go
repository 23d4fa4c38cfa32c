package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/core"
)

func TestFailoverAroundRefusedBackend(t *testing.T) {
	a := newHTTPBackend(t, "a", 1, nil)
	c := newHTTPBackend(t, "c", 1, nil)
	dead := newBackendFor(t, deadAddr(t), 1)
	r := startRelay(t, Config{Pool: core.PoolConfig{Retries: 2}}, a.b, dead, c.b)
	cl := newClient(t, 1, "")
	for i := 0; i < 12; i++ {
		res := get(t, cl, r.url+"/")
		if res.status != 200 {
			t.Fatalf("request %d: status %d %q, want 200 from a live backend", i, res.status, res.body)
		}
	}
	if got := a.hits.Load() + c.hits.Load(); got != 12 {
		t.Errorf("live backends saw %d requests, want 12", got)
	}
	if dead.Failures() == 0 {
		t.Errorf("refused dials were not counted as failures of the dead backend")
	}
	expectNoneInFlight(t, r)
}

// Every backend refusing connections, though still in rotation (nothing
// has noticed yet): relay's answer is the one for no backend up, 503 with
// Retry-After, as when checks or breakers have taken them out already.
func TestEveryBackendRefusingGives503(t *testing.T) {
	bs := []*backend.Backend{newBackendFor(t, deadAddr(t), 1), newBackendFor(t, deadAddr(t), 1)}
	r := startRelay(t, Config{Pool: core.PoolConfig{Retries: 2}}, bs...)
	cl := newClient(t, 1, "")
	for _, method := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(method, r.url+"/", strings.NewReader("x"))
		res := do(t, cl, req)
		if res.status != 503 || res.body != "Service Unavailable: no backend is up: every one tried is unreachable\n" ||
			res.header.Get("Retry-After") != core.RetryAfter {
			t.Errorf("%s: status %d %q Retry-After %q, want 503 saying no backend is up, with Retry-After",
				method, res.status, res.body, res.header.Get("Retry-After"))
		}
	}
}

// With every backend taken out by an operator, relay answers 503 at once,
// with Retry-After and a short body naming the cause, and sends nothing on.
func TestNoBackendInRotationGives503AtOnceAndRecovers(t *testing.T) {
	a := newHTTPBackend(t, "a", 1, nil)
	b := newHTTPBackend(t, "b", 1, nil)
	r := startRelay(t, Config{Pool: core.PoolConfig{Retries: 2}}, backendsOf(a, b)...)
	cl := newClient(t, 1, "")
	if res := get(t, cl, r.url+"/"); res.status != 200 {
		t.Fatalf("before: status %d", res.status)
	}
	a.b.SetDisabled(true)
	b.b.SetDraining(true)
	if n := len(r.p.pool().Available()); n != 0 {
		t.Fatalf("%d backends available after all were taken out", n)
	}
	hitsBefore := a.hits.Load() + b.hits.Load()
	start := time.Now()
	res := get(t, cl, r.url+"/")
	if d := time.Since(start); d > time.Second {
		t.Errorf("503 took %v, want it at once", d)
	}
	if res.status != 503 || res.header.Get("Retry-After") != core.RetryAfter {
		t.Errorf("status %d with Retry-After %q, want 503 with %q", res.status, res.header.Get("Retry-After"), core.RetryAfter)
	}
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
	if res.body != "Service Unavailable: no backend available\n" {
		t.Errorf("503 body %q, want a short message naming the cause", res.body)
	}
	if got := a.hits.Load() + b.hits.Load(); got != hitsBefore {
		t.Errorf("a backend out of rotation was sent a request")
	}

	b.b.SetDraining(false)
	for i := 0; i < 3; i++ {
		if res := get(t, cl, r.url+"/"); res.status != 200 || res.backend != "b" {
			t.Errorf("after recovery: status %d from %q, want 200 from b", res.status, res.backend)
		}
	}
}

// When no backend is in rotation because checks or breakers took them all
// out, relay balances over all of them (panic) rather than refuse: backends
// that fail their checks but still answer serve the requests; when none
// answers, the client gets 503 with Retry-After.
func TestPanicBalancesOverEveryBackendWhenNoneIsInRotation(t *testing.T) {
	a := newHTTPBackend(t, "a", 1, nil)
	b := newHTTPBackend(t, "b", 1, nil)
	r := startRelay(t, Config{Pool: core.PoolConfig{Retries: 2}}, backendsOf(a, b)...)
	cl := newClient(t, 1, "")
	a.b.SetHealthy(false)
	b.b.SetHealthy(false)
	seen := map[string]int{}
	for range 10 {
		res := get(t, cl, r.url+"/")
		if res.status != 200 {
			t.Fatalf("in panic: status %d %q, want 200 from a backend that still answers", res.status, res.body)
		}
		seen[res.backend]++
	}
	if seen["a"] == 0 || seen["b"] == 0 {
		t.Errorf("in panic the requests went %v, want both backends used", seen)
	}

	dead := newBackendFor(t, deadAddr(t), 1)
	dead.SetHealthy(false)
	r.p.pool().SetBackends([]*backend.Backend{dead})
	res := get(t, cl, r.url+"/")
	if res.status != 503 || res.header.Get("Retry-After") != core.RetryAfter || !strings.Contains(res.body, "unreachable") {
		t.Errorf("with the only backend down: %d %q Retry-After %q, want 503 naming it unreachable, with Retry-After",
			res.status, res.body, res.header.Get("Retry-After"))
	}
}

func TestSlowBackendGives504WithoutRetry(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	a := newHTTPBackend(t, "a", 1, slow)
	b := newHTTPBackend(t, "b", 1, slow)
	r := startRelay(t, Config{Pool: core.PoolConfig{Retries: 2, ResponseTimeout: 200 * time.Millisecond}}, backendsOf(a, b)...)
	cl := newClient(t, 1, "")
	for _, method := range []string{"GET", "POST"} {
		before := a.hits.Load() + b.hits.Load()
		req, _ := http.NewRequest(method, r.url+"/", strings.NewReader("x"))
		start := time.Now()
		res := do(t, cl, req)
		if res.status != 504 {
			t.Errorf("%s: status %d %q, want 504", method, res.status, res.body)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: 504 took %v with a 200ms response timeout", method, d)
		}
		if got := a.hits.Load() + b.hits.Load() - before; got != 1 {
			t.Errorf("%s: backends saw %d requests, want 1: a timed-out request is never retried", method, got)
		}
	}
	expectNoneInFlight(t, r)
}

// hangUpBackend reads each request and closes the connection without an
// answer, as a crashing backend does.
func hangUpBackend(t *testing.T) *rawBackend {
	return newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		rb.next(br)
	})
}

func TestDroppedRequestIsRetriedOnlyWhenIdempotent(t *testing.T) {
	tests := []struct {
		name, method string
		body         string
		wantStatus   int
		wantGoodHits int64
	}{
		{"GET goes to the next backend", "GET", "", 200, 1},
		{"PUT is idempotent", "PUT", "payload", 200, 1},
		{"POST is not sent twice", "POST", "payload", 502, 0},
		{"PATCH is not sent twice", "PATCH", "payload", 502, 0},
		{"large streamed POST is not sent twice", "POST", strings.Repeat("p", 1<<20), 502, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := hangUpBackend(t)
			good := newHTTPBackend(t, "good", 1, nil)
			r := startRelay(t, Config{Pool: core.PoolConfig{Retries: 2}}, bad.b, good.b)
			req, _ := http.NewRequest(tt.method, r.url+"/", strings.NewReader(tt.body))
			res := do(t, newClient(t, 1, ""), req)
			if res.status != tt.wantStatus {
				t.Errorf("status %d %q, want %d", res.status, res.body, tt.wantStatus)
			}
			if got := bad.hits.Load(); got != 1 {
				t.Errorf("the dropping backend saw %d requests, want 1", got)
			}
			if got := good.hits.Load(); got != tt.wantGoodHits {
				t.Errorf("the second backend saw %d requests, want %d", got, tt.wantGoodHits)
			}
			expectNoneInFlight(t, r)
		})
	}
}

// TestPostOnReusedConnectionIsNotResent: a backend answers one request on a
// connection, then takes the next one (a POST) and drops the connection
// without answering. The POST reached the backend, so relay must not send
// it again, neither to another backend nor to the same one on a new
// connection.
func TestPostOnReusedConnectionIsNotResent(t *testing.T) {
	posts := make(chan string, 4)
	bad := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		for {
			req, err := rb.next(br)
			if err != nil {
				return
			}
			if req.Method == "POST" {
				posts <- string(req.Body)
				return // hang up without answering
			}
			io.WriteString(c, okResponse("ok"))
		}
	})
	r := startRelay(t, Config{Pool: core.PoolConfig{Retries: 2}}, bad.b)
	cl := newClient(t, 1, "")
	if res := get(t, cl, r.url+"/"); res.status != 200 {
		t.Fatalf("GET: status %d", res.status)
	}
	res := post(t, cl, r.url+"/", "charge card")
	if res.status != 502 {
		t.Errorf("POST: status %d %q, want 502", res.status, res.body)
	}
	if n := len(posts); n != 1 {
		t.Errorf("backend received the POST %d times, want once", n)
	}
}

// closingBackend answers each request with keep-alive and then closes the
// connection shortly afterwards, as servers with a short keep-alive timeout
// do. closed receives once per closed connection.
func closingBackend(t *testing.T, closed chan<- struct{}) *rawBackend {
	return newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		req, err := rb.next(br)
		if err != nil {
			return
		}
		io.WriteString(c, okResponse(req.Method+" "+string(req.Body)))
		time.Sleep(20 * time.Millisecond)
		c.Close()
		closed <- struct{}{}
	})
}

// TestStalePooledConnectionIsReplaced: every pooled connection has been
// closed by the backend by the time it is reused. Idempotent requests find
// out when the read fails and are sent again on a new connection; others are
// checked before they are sent. Either way the client never sees the stale
// connection, and no request reaches the backend twice.
func TestStalePooledConnectionIsReplaced(t *testing.T) {
	closed := make(chan struct{}, 16)
	b := closingBackend(t, closed)
	r := startRelay(t, Config{}, b.b)
	cl := newClient(t, 1, "")
	steps := []struct{ method, body string }{
		{"GET", ""}, {"GET", ""}, {"POST", "one"}, {"POST", "two"}, {"GET", ""}, {"PUT", "three"}, {"DELETE", ""},
	}
	for i, s := range steps {
		req, _ := http.NewRequest(s.method, r.url+"/", strings.NewReader(s.body))
		res := do(t, cl, req)
		if want := s.method + " " + s.body; res.status != 200 || res.body != want {
			t.Errorf("request %d: %d %q, want 200 %q", i, res.status, res.body, want)
		}
		select {
		case <-closed:
		case <-time.After(ioTimeout):
			t.Fatal("backend did not close its connection")
		}
	}
	if got := b.hits.Load(); got != int64(len(steps)) {
		t.Errorf("backend saw %d requests, want %d", got, len(steps))
	}
}
