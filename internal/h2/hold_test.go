package h2

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/backend"
	"relay/internal/core"
	"relay/internal/fds"
)

// countedBackend serves body on every request and counts the connections
// relay holds open to it.
func countedBackend(t *testing.T, body []byte) (*backend.Backend, *atomic.Int64) {
	t.Helper()
	var open atomic.Int64
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return backendAt(t, s.URL), &open
}

// A client that opens its hundred streams with a window of zero must not
// make relay hold a backend connection, and its descriptor, per stream
// while it waits: a response relay has whole (here one that came with its
// head, and one read ahead because it did not) is held in memory and the
// backend connection goes back to the pool, which keeps maxIdle of them.
// Granting the window then delivers every body whole.
func TestResponsesWaitingForWindowHoldNoBackendConnection(t *testing.T) {
	const maxIdle = 4
	for _, tc := range []struct {
		name    string
		size    int
		streams int
	}{
		{"whole with its head", 2 << 10, 100},
		{"read ahead", 40 << 10, 20}, // 20 x 40 KiB: within the connection's bound
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := pattern(tc.size)
			b, open := countedBackend(t, body)
			f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) {
				pc.MaxIdlePerBackend = maxIdle
			}}, b)
			rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			rc.fr.WriteWindowUpdate(0, 16<<20)
			ids := make([]uint32, tc.streams)
			for i := range ids {
				ids[i] = uint32(2*i + 1)
				rc.get(ids[i], "/")
			}
			status := make(map[uint32]string)
			for len(status) < tc.streams {
				switch fr := rc.next().(type) {
				case *http2.MetaHeadersFrame:
					status[fr.StreamID] = fr.PseudoValue("status")
				case *http2.DataFrame:
					t.Fatalf("%d bytes of DATA in a window of 0", fr.Length)
				}
			}
			deadline := time.Now().Add(ioTimeout)
			for open.Load() > maxIdle && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := open.Load(); n > maxIdle {
				t.Fatalf("%d backend connections held open for %d streams waiting for window; want at most the %d the pool keeps idle",
					n, tc.streams, maxIdle)
			}
			rc.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
			for id, r := range rc.responses(ids...) {
				if !r.ended || status[id] != "200" || !bytes.Equal(r.body, body) {
					t.Fatalf("stream %d: status %s, %d bytes, ended %v; want 200 and the %d bytes", id, status[id], len(r.body), r.ended, tc.size)
				}
			}
		})
	}
}

// What a connection's streams hold for a client that takes nothing is
// bounded: past tailBytes a stream waits on its backend connection.
func TestHeldResponsesAreBoundedPerConnection(t *testing.T) {
	const size = 60 << 10
	body := pattern(size)
	b, open := countedBackend(t, body)
	f := startFront(t, b)
	rc := dialRaw(t, f.addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	rc.sync() // relay has answered: the connection is registered
	c := serverConn(t, f)
	const streams = 40 // 2.4 MiB: more than tailBytes
	for i := range streams {
		rc.get(uint32(2*i+1), "/")
	}
	held := tailBytes / size
	tails := func() int64 {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.tails
	}
	waitUntil(t, "streams to fill the bound and those past it to wait on their backend connections", func() bool {
		return tails() >= int64(held)*size && open.Load() >= int64(streams-held)
	})
	if n := tails(); n > tailBytes {
		t.Fatalf("streams hold %d bytes, more than the bound of %d", n, tailBytes)
	}
}

// With the process's descriptors spent, a new stream is refused with
// REFUSED_STREAM, which a client may retry, and one already open that
// needs a backend connection is answered 503; the backend is not blamed.
// Once descriptors are free, requests are served again.
func TestSpentDescriptorsRefuseNewStreams(t *testing.T) {
	b := newBackend(t, "a", nil)
	budget := fds.New(1)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{descriptors: budget}, b)
	budget.Take() // another connection holds the last one
	rc := dialRaw(t, f.addr)
	// More refusals than the Rapid Reset rule lets a client waste, fewer
	// than the control budget: relay's shortage is not held against the
	// client.
	const refused = resetMinStreams + 100
	for i := range refused {
		id := uint32(2*i + 1)
		rc.get(id, "/")
		if r := rc.response(id); !r.reset || r.code != http2.ErrCodeRefusedStream {
			t.Fatalf("stream %d with no descriptor left: status %d reset %v (%v); want REFUSED_STREAM", id, r.status, r.reset, r.code)
		}
	}
	if b.Ejected() || b.Failures() != 0 {
		t.Fatal("the backend was blamed for relay's shortage")
	}
	budget.Give()
	rc.get(2*refused+1, "/")
	if r := rc.response(2*refused + 1); r.status != 200 {
		t.Fatalf("with descriptors free again: status %d reset %v; want 200", r.status, r.reset)
	}
}
