package h2

import (
	"io"
	"net/http"
	"runtime"
	"strings"
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
	// Whatever way the test ends, the held handlers go on and the held
	// requests end before the front and the backend close (cleanups run
	// last registered first), which would otherwise wait on them.
	var wg sync.WaitGroup
	var releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(func() {
		letGo()
		if !waitGroup(&wg, ioTimeout) {
			t.Error("the held requests did not end")
		}
	})
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
	// The runner of that stream counts itself idle and then waits for the
	// next stream, a moment after the client has the answer; a stream that
	// comes before it waits starts a runner of its own, and it would stay
	// idle while every held stream runs. Wait for it so that the first held
	// stream runs on it.
	waitUntil(t, "the runner of the first stream waiting for the next", func() bool {
		return runnersWaiting() == 1
	})
	base := runtime.NumGoroutine()
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
	letGo()
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

// runnersWaiting counts the runners, of every connection, that wait at
// their connection's queue for a stream. Goroutine dumps are the one
// place this shows: a runner has counted itself idle (conn.idle) a
// moment before it waits.
func runnersWaiting() int {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	waiting := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, frames, _ := strings.Cut(g, "\n")
		if !strings.Contains(header, "[chan receive") {
			continue
		}
		// The first frame outside the runtime (whose frames show with
		// GOTRACEBACK=system) is where the goroutine waits.
		for _, line := range strings.Split(frames, "\n") {
			if strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "runtime.") {
				continue
			}
			if strings.HasPrefix(line, "relay/internal/h2.(*conn).runner(") {
				waiting++
			}
			break
		}
	}
	return waiting
}
