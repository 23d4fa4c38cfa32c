package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/core"
)

// probeConfig opens a breaker after three 503s in a row for open, with no
// retries and no cap on the share ejected, so one backend can be ejected.
func probeConfig(open time.Duration) Config {
	cfg := withDefaults(Config{})
	cfg.Pool.BreakerFailures = 3
	cfg.Pool.BreakerStatuses = []int{503}
	cfg.Pool.BreakerOpenTime = open
	cfg.Pool.Retries = 0
	cfg.Pool.MaxEjectedPercent = 100
	return cfg
}

// tripBreaker sends requests until the backend has answered three 503s
// and its breaker opened.
func tripBreaker(t *testing.T, cl *http.Client, r *testRelay, hb *httpBackend) {
	t.Helper()
	for range 3 {
		if res := get(t, cl, r.url+"/"); res.status != 503 {
			t.Fatalf("tripping the breaker: %d", res.status)
		}
	}
	eventually(t, "the breaker opening", hb.b.Ejected)
}

// A probe whose response streams for a long time closes the breaker as
// soon as its head arrives: the backend takes its share again while the
// body is still on its way, instead of staying half-open for the stream.
func TestProbeIsJudgedByItsResponseHead(t *testing.T) {
	const open = 300 * time.Millisecond
	var streaming atomic.Bool
	hb := newHTTPBackend(t, "streamer", 1, func(w http.ResponseWriter, r *http.Request) {
		if !streaming.Load() {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(200)
		for range 15 {
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
			w.Write([]byte("x"))
		}
	})
	r := startRelayExactly(t, probeConfig(open), hb.b)
	cl := newClient(t, 2, "")
	tripBreaker(t, cl, r, hb)
	streaming.Store(true)
	time.Sleep(open)

	resp, err := cl.Get(r.url + "/stream") // the probe
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := time.Now()
	eventually(t, "the breaker closing", func() bool { return !hb.b.Ejected() })
	if d := time.Since(head); d > 500*time.Millisecond {
		t.Errorf("the breaker closed %v after the probe's head arrived, want at once (the body takes 1.5 s)", d)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || len(body) != 15 {
		t.Errorf("probe body: %d bytes, %v", len(body), err)
	}
}

// While the only backend left is half-open with its probe out, other
// requests are not refused: no backend is in rotation, so the pool panics
// and balances over all of them.
func TestHalfOpenBackendWithItsProbeOutDoesNotRefuseOthers(t *testing.T) {
	const open = 300 * time.Millisecond
	var slow atomic.Bool
	hb := newHTTPBackend(t, "slow", 1, func(w http.ResponseWriter, r *http.Request) {
		if !slow.Load() {
			w.WriteHeader(503)
			return
		}
		time.Sleep(500 * time.Millisecond)
		w.Write([]byte("slow"))
	})
	r := startRelayExactly(t, probeConfig(open), hb.b)
	cl := newClient(t, 2, "")
	tripBreaker(t, cl, r, hb)
	slow.Store(true)
	time.Sleep(open)

	probe := make(chan result, 1)
	go func() { probe <- get(t, cl, r.url+"/probe") }()
	eventually(t, "the probe reaching the backend", func() bool { return hb.hits.Load() == 4 })
	if res := get(t, cl, r.url+"/other"); res.status != 200 {
		t.Errorf("beside the probe: %d %q, want 200 (panic: balance over every backend)", res.status, res.body)
	}
	if res := <-probe; res.status != 200 {
		t.Errorf("probe: %d", res.status)
	}
	if hb.b.Ejected() {
		t.Error("the breaker is still open after the probe succeeded")
	}
}

// An informational response (103 Early Hints) that reached the client
// makes the request final on its backend: when the backend then drops
// the connection, the client gets relay's 502 after the 103, and the
// request is not sent to another backend.
func TestNoRetryAfterAnEarlyHintReachedTheClient(t *testing.T) {
	hinter := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		if _, err := rb.next(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
	})
	good := newHTTPBackend(t, "good", 1, nil)
	r := startRelay(t, Config{Pool: core.PoolConfig{Retries: 2}}, hinter.b, good.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	hint, _ := readResponse(t, br, "GET")
	if hint.StatusCode != 103 {
		t.Fatalf("first response %d, want the 103", hint.StatusCode)
	}
	final, body := readResponse(t, br, "GET")
	if final.StatusCode != 502 {
		t.Errorf("final response %d %q, want relay's 502", final.StatusCode, body)
	}
	if n := good.hits.Load(); n != 0 {
		t.Errorf("the other backend got %d requests, want none: bytes had reached the client", n)
	}
	if n := hinter.hits.Load(); n != 1 {
		t.Errorf("the hinting backend got %d requests, want 1", n)
	}
}
