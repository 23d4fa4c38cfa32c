package h2

import (
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
	"relay/internal/h2test"
)

// TestCallDeadlineEndsAResponseThatNeverWaits checks that a gRPC call's
// deadline ends its response even when relay never waits for the
// backend: one that sends faster than the client takes keeps bytes
// waiting at relay for every read, and the call must end all the same.
func TestCallDeadlineEndsAResponseThatNeverWaits(t *testing.T) {
	chunk := make([]byte, 16<<10)
	be := h2test.ServeH2C(t, &http2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("content-type", "application/grpc")
		w.WriteHeader(200)
		stop := time.After(ioTimeout)
		for {
			select {
			case <-r.Context().Done():
				return
			case <-stop:
				return
			default:
			}
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{
		pool: func(pc *core.PoolConfig) { pc.Protocol = core.H2C },
	}, backendAt(t, be.URL))
	rc := dialRaw(t, f.addr)
	rc.autoWindow = false
	const deadline = 300 * time.Millisecond
	start := time.Now()
	rc.writeHeaders(1, true, request("POST", "/svc/Stream", "content-type", "application/grpc", "grpc-timeout", "300m")...)
	// The client takes a frame's worth every 10ms: far slower than the
	// backend sends, so bytes always wait at relay.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if time.Since(start) > deadline+3*time.Second {
			t.Fatalf("the response still flows %v after the call's deadline of %v", time.Since(start)-deadline, deadline)
		}
		switch fr := rc.next().(type) {
		case *http2.RSTStreamFrame:
			if fr.StreamID == 1 {
				return
			}
		case *http2.HeadersFrame, *http2.MetaHeadersFrame:
			if fr.Header().StreamID == 1 && fr.Header().Flags.Has(http2.FlagHeadersEndStream) {
				return
			}
		case *http2.DataFrame:
			if fr.StreamID != 1 {
				continue
			}
			if fr.StreamEnded() {
				return
			}
			<-tick.C
			if fr.Length > 0 {
				rc.fr.WriteWindowUpdate(0, fr.Length)
				rc.fr.WriteWindowUpdate(1, fr.Length)
			}
		}
	}
}
