package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// gatedBackend holds requests to /slow until release is closed and
// answers everything else at once. arrived receives once per held request.
func gatedBackend(t *testing.T, arrived chan<- struct{}, release <-chan struct{}) *httpBackend {
	return newHTTPBackend(t, "a", 1, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		io.WriteString(w, "done")
	})
}

func waitN(t *testing.T, ch <-chan struct{}, n int, what string) {
	t.Helper()
	timeout := time.After(ioTimeout)
	for i := 0; i < n; i++ {
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("only %d of %d %s", i, n, what)
		}
	}
}

// TestShutdownDrainsInFlightRequests: 50 requests are waiting on a backend
// when Shutdown is called. relay stops accepting and closes idle client
// connections at once, lets all 50 finish with 200, and returns as soon as
// they have.
func TestShutdownDrainsInFlightRequests(t *testing.T) {
	const n = 50
	arrived := make(chan struct{}, n)
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	hb := gatedBackend(t, arrived, release)
	r := startRelay(t, Config{}, hb.b)

	idle, idleBr := dialRelay(t, r)
	write(t, idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := readResponse(t, idleBr, "GET"); resp.StatusCode != 200 {
		t.Fatalf("idle connection's request: %d", resp.StatusCode)
	}

	type outcome struct {
		status int
		body   string
		err    error
	}
	outcomes := make(chan outcome, n)
	c := newClient(t, n, "")
	for i := 0; i < n; i++ {
		go func() {
			resp, err := c.Get(r.url + "/slow")
			if err != nil {
				outcomes <- outcome{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			outcomes <- outcome{status: resp.StatusCode, body: string(b), err: err}
		}()
	}
	waitN(t, arrived, n, "requests reached the backend")

	shutdown := make(chan error, 1)
	start := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		shutdown <- r.p.Shutdown(ctx)
	}()

	// The idle connection is closed at once...
	idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := idleBr.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("idle connection: read returned %v, want EOF", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("idle connection closed %v after Shutdown began", d)
	}
	// ...which Shutdown does after closing the listener, so new
	// connections are refused by now.
	if c, err := net.DialTimeout("tcp", r.addr, time.Second); err == nil {
		c.Close()
		t.Errorf("a new connection was accepted during shutdown")
	}
	select {
	case err := <-shutdown:
		t.Fatalf("Shutdown returned %v with %d requests in flight", err, n)
	default:
	}

	close(release)
	released = true
	releasedAt := time.Now()
	for i := 0; i < n; i++ {
		o := <-outcomes
		if o.err != nil || o.status != 200 || o.body != "done" {
			t.Errorf("in-flight request ended with %d %q %v, want 200", o.status, o.body, o.err)
		}
	}
	select {
	case err := <-shutdown:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if d := time.Since(releasedAt); d > time.Second {
			t.Errorf("Shutdown returned %v after the last request finished", d)
		}
	case <-time.After(ioTimeout):
		t.Fatal("Shutdown did not return after the requests finished")
	}
	if err := r.serveResult(t); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve returned %v, want ErrServerClosed", err)
	}
	if n := r.p.Connections(); n != 0 {
		t.Errorf("%d client connections left open", n)
	}
}

// TestShutdownGivesUpWhenContextEnds: a request that outlasts the shutdown
// window is cut off and Shutdown reports the context's error.
func TestShutdownGivesUpWhenContextEnds(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	hb := gatedBackend(t, arrived, release)
	r := startRelay(t, Config{}, hb.b)
	got := make(chan error, 1)
	go func() {
		resp, err := newClient(t, 1, "").Get(r.url + "/slow")
		if err == nil {
			resp.Body.Close()
			err = errors.New(resp.Status)
		}
		got <- err
	}()
	waitN(t, arrived, 1, "requests reached the backend")

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := r.p.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown returned %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Shutdown took %v with a 100ms context", d)
	}
	select {
	case err := <-got:
		t.Logf("cut-off client saw: %v", err)
	case <-time.After(ioTimeout):
		t.Errorf("the client of the cut-off request was left waiting")
	}
}

// TestServeAfterShutdown: a listener handed to a stopped proxy is closed
// and refused.
func TestServeAfterShutdown(t *testing.T) {
	hb := newHTTPBackend(t, "a", 1, nil)
	r := startRelay(t, Config{}, hb.b)
	if err := r.p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	if err := r.p.Serve(ln); !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve after Shutdown returned %v", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Errorf("listener still open")
	}
}
