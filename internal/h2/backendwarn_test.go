package h2

import (
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
	"relay/internal/testlog"
)

// TestBackendWarningsAreBounded checks that an HTTP/2 backend breaking
// the protocol on every connection relay opens to it cannot flood relay's
// log: each broken connection is a warning, but at most ten a second
// reach the log, as with the warnings clients cause.
func TestBackendWarningsAreBounded(t *testing.T) {
	log, logs := testlog.New()
	be := startHostileBackend(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		// HEADERS on stream 0: a connection error.
		hc.Write(func(fr *http2.Framer) {
			fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersEndHeaders, 0, []byte{0x88})
		})
	})
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{
		pool: func(pc *core.PoolConfig) { pc.Protocol = core.H2C },
		core: func(cc *core.Config) { cc.Logger = log },
	}, backendAt(t, be.URL))
	client := h2Client(t)
	start := time.Now()
	const requests = 60
	for range requests {
		resp, err := client.Get(f.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("status %d from a backend that breaks every connection, want 502", resp.StatusCode)
		}
	}
	took := time.Since(start)
	broken := be.Heads.Load() // every request head met a broken connection
	lines := logs.Count("abused the connection")
	if broken < requests {
		t.Fatalf("the backend read %d request heads, want at least %d", broken, requests)
	}
	if most := 10 * (int(took/time.Second) + 1); lines > most {
		t.Errorf("%d warnings logged for %d broken connections in %v, want at most %d", lines, broken, took, most)
	}
	if lines == 0 {
		t.Error("no warning logged for a backend breaking the protocol")
	}
}

// TestBrokenBackendConnectionFailsItsStreamsAtOnce checks that the
// requests on a connection an HTTP/2 backend broke fail as soon as relay
// gives the connection up, not once relay has let the backend take its
// GOAWAY (up to a second, while the backend keeps the connection open).
func TestBrokenBackendConnectionFailsItsStreamsAtOnce(t *testing.T) {
	be := startHostileBackend(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		hc.Write(func(fr *http2.Framer) {
			fr.WriteRawFrame(http2.FrameHeaders, http2.FlagHeadersEndHeaders, 0, []byte{0x88})
		})
	})
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{
		pool: func(pc *core.PoolConfig) { pc.Protocol = core.H2C },
	}, backendAt(t, be.URL))
	client := h2Client(t)
	for i := range 3 {
		start := time.Now()
		resp, err := client.Get(f.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// Half the second relay lingers on the backend's connection.
		if took := time.Since(start); resp.StatusCode != http.StatusBadGateway || took > 500*time.Millisecond {
			t.Fatalf("request %d: %d after %v, want 502 before relay is done with the broken connection", i, resp.StatusCode, took)
		}
	}
}
