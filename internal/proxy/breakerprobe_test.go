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

// startTripped starts relay over one backend that answers 503 until its
// breaker opens (three in a row, no retries, no cap on the share ejected)
// and then hands its requests to then. It returns once the open time has
// passed: the next request is the half-open probe.
func startTripped(t *testing.T, open time.Duration, then http.HandlerFunc) (*testRelay, *http.Client, *httpBackend) {
	t.Helper()
	var tripped atomic.Bool
	hb := newHTTPBackend(t, "tripped", 1, func(w http.ResponseWriter, r *http.Request) {
		if !tripped.Load() {
			w.WriteHeader(503)
			return
		}
		then(w, r)
	})
	cfg := withDefaults(Config{})
	cfg.Pool.BreakerFailures = 3
	cfg.Pool.BreakerStatuses = []int{503}
	cfg.Pool.BreakerOpenTime = open
	cfg.Pool.Retries = 0
	cfg.Pool.MaxEjectedPercent = 100
	r := startRelayExactly(t, cfg, hb.b)
	cl := newClient(t, 2, "")
	for range 3 {
		if res := get(t, cl, r.url+"/"); res.status != 503 {
			t.Fatalf("tripping the breaker: %d", res.status)
		}
	}
	eventually(t, "the breaker opening", hb.b.Ejected)
	tripped.Store(true)
	time.Sleep(open)
	return r, cl, hb
}

// A probe whose response streams for a long time closes the breaker as
// soon as its head arrives: the backend takes its share again while the
// body is still on its way, instead of staying half-open for the stream.
func TestProbeIsJudgedByItsResponseHead(t *testing.T) {
	r, cl, hb := startTripped(t, 300*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		for range 15 {
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
			w.Write([]byte("x"))
		}
	})

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
	r, cl, hb := startTripped(t, 300*time.Millisecond, func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(500 * time.Millisecond)
		w.Write([]byte("slow"))
	})

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
