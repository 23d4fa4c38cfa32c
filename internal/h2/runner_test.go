package h2

import (
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
)

// TestRunnersAreBoundedAndEndWithTheConnection runs 84 requests at once
// on one connection, held by the backend until all are in, then lets them
// go: afterwards maxIdleRunners goroutines wait for the connection's next
// streams, later requests run on them, and once the client closes the
// connection they end too (the count falls below where it was with one
// stream's runner and the connection's goroutines).
func TestRunnersAreBoundedAndEndWithTheConnection(t *testing.T) {
	const n = maxIdleRunners + 20
	arrived := make(chan struct{}, n)
	release := make(chan struct{})
	f := startFront(t, newBackend(t, "b", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			arrived <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	client := h2Client(t)
	get := func(path string) error {
		resp, err := client.Get(f.url + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := get("/"); err != nil {
		t.Fatal(err)
	}
	f.core.CloseIdle()
	base := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := get("/hold"); err != nil {
				t.Error(err)
			}
		}()
	}
	for range n {
		await(t, arrived, "the held requests at the backend")
	}
	if c := serverConn(t, f); c.idle.Load() != 0 {
		t.Fatalf("%d runners idle while every stream runs", c.idle.Load())
	}
	close(release)
	if !waitGroup(&wg, ioTimeout) {
		t.Fatal("the held requests did not end")
	}
	c := serverConn(t, f)
	// The backend's goroutines, one for each of relay's 84 upstream
	// connections, are no part of what is counted.
	f.core.CloseIdle()
	waitUntil(t, "the runners of the ended streams idle or gone", func() bool {
		return c.idle.Load() == maxIdleRunners && runtime.NumGoroutine() <= base+maxIdleRunners+5
	})
	// Requests one after another run on the waiting runners: no new
	// goroutine stays. (A runner is back waiting a moment after its
	// client has the answer.)
	before := runtime.NumGoroutine()
	for range 20 {
		if err := get("/"); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the runners back waiting, and no goroutine more", func() bool {
		return c.idle.Load() == maxIdleRunners && runtime.NumGoroutine() <= before
	})
	client.CloseIdleConnections()
	f.core.CloseIdle()
	waitUntil(t, "the connection's runners ended with it", func() bool {
		return runtime.NumGoroutine() <= base
	})
}
