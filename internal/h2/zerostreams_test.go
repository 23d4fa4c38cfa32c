package h2

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/backend"
	"relay/internal/core"
	"relay/internal/fds"
)

// TestBackendAllowingNoStreamIsNotDialedEndlessly has a backend advertise
// SETTINGS_MAX_CONCURRENT_STREAMS 0 on every connection (it takes no
// request for now, RFC 9113 6.5.2). A request to it fails at once, as
// one to a backend that cannot be reached, after one connection, rather than dial connection after
// connection until relay's descriptors are spent.
func TestBackendAllowingNoStreamIsNotDialedEndlessly(t *testing.T) {
	var accepted atomic.Int64
	be := prefaceBackend(t, &accepted, func(nc net.Conn) {
		fr := http2.NewFramer(nc, nc)
		fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0})
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
				fr.WriteSettingsAck()
			}
		}
	})
	budget := fds.New(200)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{descriptors: budget, pool: func(pc *core.PoolConfig) {
		pc.Protocol = core.H2C
		pc.IdleTimeout = 200 * time.Millisecond
	}}, be)
	client := h2Client(t)
	start := time.Now()
	resp, err := client.Get(f.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "unreachable") {
		t.Errorf("%s %q, want 503, the backend unreachable", resp.Status, body)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the request took %v", took)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("relay dialed %d connections to a backend that allows no stream, want 1", n)
	}
	t.Logf("%s %q after %d connections", resp.Status, body, accepted.Load())
	waitUntil(t, "the connections closed", func() bool { return budget.Used() == 0 })
}

// TestBackendGoingAwayAtOnceIsNotDialedEndlessly has a backend send
// GOAWAY right behind its SETTINGS on every connection: a request dials
// a bounded number of them, then fails as for a backend that cannot be
// reached.
func TestBackendGoingAwayAtOnceIsNotDialedEndlessly(t *testing.T) {
	var accepted atomic.Int64
	be := prefaceBackend(t, &accepted, func(nc net.Conn) {
		bw := bufio.NewWriter(nc)
		fr := http2.NewFramer(bw, nc)
		fr.WriteSettings()
		fr.WriteGoAway(0, http2.ErrCodeNo, nil)
		bw.Flush()
		io.Copy(io.Discard, nc)
	})
	budget := fds.New(200)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{descriptors: budget, pool: func(pc *core.PoolConfig) {
		pc.Protocol = core.H2C
	}}, be)
	client := h2Client(t)
	for range 5 {
		resp, err := client.Get(f.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 500 {
			t.Errorf("%s from a backend that goes away at once", resp.Status)
		}
	}
	if n := accepted.Load(); n > 5*5 {
		t.Errorf("relay dialed %d connections for 5 requests to a backend that goes away at once", n)
	}
	t.Logf("%d connections for 5 requests", accepted.Load())
	waitUntil(t, "the connections closed", func() bool { return budget.Used() == 0 })
}

// prefaceBackend is a backend that counts its connections in accepted
// and hands each to serve once relay's client preface has come on it.
func prefaceBackend(t *testing.T, accepted *atomic.Int64, serve func(nc net.Conn)) *backend.Backend {
	return connBackend(t, func(nc net.Conn) {
		accepted.Add(1)
		pre := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(nc, pre); err != nil {
			return
		}
		serve(nc)
	})
}
