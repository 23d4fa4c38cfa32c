package proxy

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// Kept upstream connections are closed once idle for the pool's idle
// timeout, with no request coming to notice them: after a load stops, the
// backend's connections go back to none.
func TestIdleUpstreamConnectionsCloseWithoutTraffic(t *testing.T) {
	const idle = 300 * time.Millisecond
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(5 * time.Millisecond)
		w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	b := newBackendFor(t, srv.Listener.Addr().String(), 1)
	cfg := withDefaults(Config{})
	cfg.Pool.IdleTimeout = idle
	r := startRelayExactly(t, cfg, b)
	cl := newClient(t, 20, "")
	getConcurrently(t, cl, r.url+"/", 20, 5)
	stopped := time.Now()
	if n := open.Load(); n < 2 {
		t.Fatalf("only %d upstream connections open after the load; the test needs several", n)
	}
	for open.Load() > 0 {
		if time.Since(stopped) > idle+200*time.Millisecond {
			t.Fatalf("%d upstream connections still open %v after the load stopped, idle timeout %v", open.Load(), time.Since(stopped), idle)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("every upstream connection closed %v after the load stopped", time.Since(stopped).Round(time.Millisecond))

	// A connection kept after that is reused and reaped the same way.
	if res := get(t, cl, r.url+"/"); res.status != 200 {
		t.Fatalf("after the reaping: status %d", res.status)
	}
	eventually(t, "the new connection reaped too", func() bool { return open.Load() == 0 })
}
