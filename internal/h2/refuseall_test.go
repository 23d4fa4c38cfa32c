package h2

import (
	"bytes"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// A backend that refuses every stream, or sends GOAWAY on every
// connection before processing anything, does not make relay loop or
// dial without bound: a call is tried at most retries+1 times, and the
// client gets a gRPC-shaped UNAVAILABLE.
func TestH2BackendRefusingEverythingIsTriedBoundedly(t *testing.T) {
	for _, how := range []string{"REFUSED_STREAM", "GOAWAY"} {
		t.Run(how, func(t *testing.T) {
			var heads atomic.Int64
			be := startHostileBackend(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
				heads.Add(1)
				if how == "GOAWAY" {
					hc.Write(func(fr *http2.Framer) { fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
					return
				}
				hc.Write(func(fr *http2.Framer) { fr.WriteRSTStream(req.StreamID, http2.ErrCodeRefusedStream) })
			})
			f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) {
				pc.Protocol = core.H2C
				pc.Retries = 2
				pc.RetryBudgetPercent, pc.RetryBudgetFloor = 100, 100
			}}, backendAt(t, be.URL))
			client := h2Client(t)
			for i := range 5 {
				req, _ := http.NewRequest("POST", f.url+"/svc/Call", bytes.NewReader([]byte{0, 0, 0, 0, 0}))
				req.Header.Set("Content-Type", "application/grpc")
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				st := resp.Header.Get("Grpc-Status") + resp.Trailer.Get("Grpc-Status")
				if resp.StatusCode != 200 || st != "14" {
					t.Fatalf("call %d: %d grpc-status %q, want 200 and 14 (UNAVAILABLE)", i, resp.StatusCode, st)
				}
				if n := heads.Load(); n > int64(3*(i+1)) {
					t.Fatalf("%d calls reached the backend %d times; retries is 2", i+1, n)
				}
			}
		})
	}
}
