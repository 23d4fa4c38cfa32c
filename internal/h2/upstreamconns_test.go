package h2

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
	"relay/internal/h2test"
)

// startH2CBackend serves h over h2c with at most maxStreams streams a
// connection, counting the connections it accepted and those still open.
func startH2CBackend(t *testing.T, maxStreams uint32, h http.HandlerFunc) *h2test.Server {
	t.Helper()
	return h2test.ServeH2C(t, &http2.Server{MaxConcurrentStreams: maxStreams}, h)
}

// TestUpstreamStreamsShareConnectionsUpToTheBackendsLimit checks relay's
// HTTP/2 connections to a backend: requests share a connection up to the
// backend's SETTINGS_MAX_CONCURRENT_STREAMS, relay opens another when
// every one is full, and closes them once idle for the pool's idle
// timeout.
func TestUpstreamStreamsShareConnectionsUpToTheBackendsLimit(t *testing.T) {
	release := make(chan struct{})
	var inside atomic.Int64
	be := startH2CBackend(t, 2, func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		<-release
		io.WriteString(w, "ok")
	})
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) {
		pc.Protocol = core.H2C
		pc.IdleTimeout = 300 * time.Millisecond
	}}, backendAt(t, be.URL))
	client := h2Client(t)
	const requests = 6
	var wg sync.WaitGroup
	errs := make(chan string, requests)
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Get(f.url + "/")
			if err != nil {
				errs <- err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(body) != "ok" {
				errs <- resp.Status + " " + string(body)
			}
		}()
	}
	waitUntil(t, "every request at the backend", func() bool { return inside.Load() == requests })
	if n := be.Accepted.Load(); n != requests/2 {
		t.Errorf("relay opened %d connections for %d requests at 2 streams each, want %d", n, requests, requests/2)
	}
	close(release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("request failed: %s", strings.TrimSpace(e))
	}
	waitUntil(t, "relay's idle connections closed", func() bool { return be.Open.Load() == 0 })
}
