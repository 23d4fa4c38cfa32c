package h2

import (
	"bytes"
	"io"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// A backend may answer a call whole while the client is still sending
// (RFC 9113 8.1) and read no more of the request. Once the client has the
// response, relay stops sending the rest and resets the backend's stream
// at once: it does not sit until response_timeout waiting for a window
// the backend will never open, holding the stream and the call.
func TestH2BackendAnsweringEarlyEndsTheRequestBody(t *testing.T) {
	be := startHostileBackend(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		// No WINDOW_UPDATE ever: relay can send 64 KiB of the body.
		hc.Head(req.StreamID, false, ":status", "200", "content-type", "application/grpc")
		hc.Data(req.StreamID, false, "done")
		hc.Head(req.StreamID, true, "grpc-status", "0")
	})
	b := backendAt(t, be.URL)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) {
		pc.Protocol = core.H2C
		pc.ResponseTimeout = 30 * time.Second
	}}, b)
	client := h2Client(t)

	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		// More than the backend's window, then the client keeps the
		// stream open: a bidirectional call still sending.
		pw.Write(bytes.Repeat([]byte("x"), 200<<10))
	}()
	req, _ := http.NewRequest("POST", f.url+"/svc/Call", pr)
	req.Header.Set("Content-Type", "application/grpc")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "done" || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Fatalf("response %q %v, trailers %v", body, err, resp.Trailer)
	}
	select {
	case <-be.Resets:
	case <-time.After(5 * time.Second):
		t.Fatalf("the backend's stream was not reset %v after relay had its whole response", time.Since(start))
	}
	waitUntil(t, "the call to end at relay", func() bool { return b.InFlight() == 0 })
}
