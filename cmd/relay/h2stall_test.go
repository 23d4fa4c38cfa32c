package main

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/testcert"
)

// An HTTP/2 client that opens its flow-control windows wide, asks for a
// large response and then reads nothing is cut off once it has taken no
// bytes for idle_timeout, and the backend request ends with it: writes
// gathered for the client (rawio.BatchConn) cannot hold the connection,
// the stream's goroutine and the backend for as long as the client likes.
func TestHTTP2ClientThatStopsReadingIsCutOff(t *testing.T) {
	ca := testcert.NewCA(t)
	var open atomic.Int64
	be := newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/big" {
				h.ServeHTTP(w, r)
				return
			}
			open.Add(1)
			defer open.Add(-1)
			chunk := make([]byte, 64<<10)
			for i := 0; i < 4096; i++ { // 256 MiB at most
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
	})
	const idle = time.Second
	h := dialH2Relay(t, ca, "idle_timeout: 1s\n", be.url)
	const wide = 1<<31 - 1
	if err := h.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: wide}); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteWindowUpdate(0, wide-65535); err != nil {
		t.Fatal(err)
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock("/big"), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// The backend starts sending; the client reads nothing from here on.
	deadline := time.Now().Add(10 * time.Second)
	for open.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the backend")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	for open.Load() > 0 {
		if time.Since(start) > 10*idle {
			t.Fatalf("the backend request still runs %v after the client stopped reading (idle_timeout %v)", time.Since(start), idle)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("backend request ended %v after it started, with a client that reads nothing", time.Since(start).Round(time.Millisecond))
	// relay closed the connection: what the client reads now ends.
	if closed, _, _ := h.closedWithin(5 * time.Second); !closed {
		t.Error("relay kept the connection of a client that read nothing")
	}
}
