package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"relay/internal/grpctest"
)

// TestProtocolReloadUnderLoad switches a pool h2c → http/1.1 → h2c by
// reload while gRPC calls and plain HTTP/2 requests flow, against a
// backend that speaks both protocols. Plain requests never fail; gRPC
// calls fail only while the pool speaks HTTP/1.1, and then with
// UNAVAILABLE at once, never by hanging; once the pool is h2c again every
// call succeeds.
func TestProtocolReloadUnderLoad(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		s := grpctest.StartDual(t)
		head := fmt.Sprintf("listen: 127.0.0.1:0\nlog_level: info\nh2c: true\nhealth_check_type: tcp\nprocesses: %d\nbackends:\n  - url: %s\n", processes, s.URL)
		file := writeFile(t, t.TempDir(), "relay.yml", head+"protocol: h2c\n")
		r, started := startRelay(t, "", "-config", file)
		admin := adminOf(t, started)
		_, client := grpctest.Dial(t, r.addr, nil)
		tr := &http.Transport{Protocols: new(http.Protocols)}
		tr.Protocols.SetUnencryptedHTTP2(true)
		t.Cleanup(tr.CloseIdleConnections)
		plain := &http.Client{Transport: tr, Timeout: 10 * time.Second}

		var phase atomic.Value // the protocol the pool was last reloaded to
		phase.Store("h2c")
		var mu sync.Mutex
		var bad []string
		var grpcOK, grpcFailed, plainOK, h1Seen atomic.Int64
		fail := func(format string, args ...any) {
			mu.Lock()
			if len(bad) < 10 {
				bad = append(bad, fmt.Sprintf(format, args...))
			}
			mu.Unlock()
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 5000; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if w < 4 {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						begin := time.Now()
						_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 10})
						cancel()
						switch code := status.Code(err); {
						case err == nil:
							grpcOK.Add(1)
						case code == codes.Unavailable && time.Since(begin) < time.Second:
							grpcFailed.Add(1)
						default:
							fail("gRPC call during %s after %v: %v", phase.Load(), time.Since(begin), err)
						}
						continue
					}
					resp, err := plain.Get(r.url("/plain"))
					if err != nil {
						fail("plain request during %s: %v", phase.Load(), err)
						continue
					}
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || string(body) != "ok" {
						fail("plain request during %s: %s %q", phase.Load(), resp.Status, body)
						continue
					}
					plainOK.Add(1)
					if resp.Header.Get("X-Proto") == "HTTP/1.1" {
						h1Seen.Add(1)
					}
				}
			}()
		}
		reload := func(protocol string) {
			phase.Store(protocol)
			if err := writeFileAtomic(file, head+"protocol: "+protocol+"\n"); err != nil {
				t.Fatal(err)
			}
			if code, v := adminCall(t, admin, "POST", "/reload", ""); code != 200 {
				t.Fatalf("POST /reload: %d %v", code, v)
			}
		}
		waitFor := func(what string, cond func() bool) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for !cond() {
				if time.Now().After(deadline) {
					t.Fatalf("%s: not within 10s", what)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		waitFor("calls flowing", func() bool { return grpcOK.Load() > 50 && plainOK.Load() > 50 })
		reload("http/1.1")
		waitFor("the backend reached over HTTP/1.1", func() bool { return h1Seen.Load() > 20 && grpcFailed.Load() > 20 })
		reload("h2c")
		// Settled once both processes carry gRPC again: then no call
		// may fail.
		waitFor("gRPC carried again", func() bool {
			for range 6 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
				cancel()
				if err != nil {
					return false
				}
			}
			return true
		})
		failedBefore, okBefore := grpcFailed.Load(), grpcOK.Load()
		waitFor("more calls after the switch back", func() bool { return grpcOK.Load() > okBefore+400 })
		close(stop)
		wg.Wait()
		if n := grpcFailed.Load() - failedBefore; n != 0 {
			t.Errorf("%d gRPC calls failed after the pool was h2c again", n)
		}
		for _, b := range bad {
			t.Error(b)
		}
		t.Logf("gRPC: %d ok, %d UNAVAILABLE while HTTP/1.1; plain: %d ok, %d over HTTP/1.1", grpcOK.Load(), grpcFailed.Load(), plainOK.Load(), h1Seen.Load())
	})
}
