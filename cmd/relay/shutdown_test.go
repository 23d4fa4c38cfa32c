package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestGracefulShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sig  os.Signal
	}{
		{name: "SIGTERM", sig: syscall.SIGTERM},
		{name: "SIGINT", sig: syscall.SIGINT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			const (
				inFlight = 50
				delay    = 2 * time.Second
				exitBy   = 3 * time.Second
			)
			// arrived hears of each slow request once the backend holds it,
			// so the signal goes out only when all of them are in flight.
			arrived := make(chan struct{}, inFlight)
			slow := newBackend(t, func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Query().Has("delay") {
						arrived <- struct{}{}
					}
					next.ServeHTTP(w, r)
				})
			})
			r, _ := startRelay(t, "", "-config", writeConfig(t, "access_log: false\n"+backendsYAML([]string{slow.url})))

			type result struct {
				code int
				body string
				err  error
			}
			results := make(chan result, inFlight)
			tr := &http.Transport{MaxIdleConnsPerHost: inFlight}
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for range inFlight {
				go func() {
					resp, err := c.Get(r.url("/?delay=" + delay.String()))
					if err != nil {
						results <- result{err: err}
						return
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					results <- result{code: resp.StatusCode, body: string(body), err: err}
				}()
			}
			for i := range inFlight {
				select {
				case <-arrived:
				case <-time.After(10 * time.Second):
					t.Fatalf("only %d of %d requests reached the backend", i, inFlight)
				}
			}

			r.signal(tt.sig)
			signalled := time.Now()
			if _, ok := r.waitLog(exitBy, func(l logLine) bool { return l.Msg() == "shutting down" }); !ok {
				t.Fatal("no \"shutting down\" line after the signal")
			}
			// Draining relay stops taking new connections. The line above is
			// written just before the listener closes, so give it a moment.
			for refused := false; !refused; {
				conn, err := net.DialTimeout("tcp", r.addr, time.Second)
				if refused = err != nil; !refused {
					conn.Close()
					if time.Since(signalled) > time.Second {
						t.Error("relay still accepts connections a second into draining")
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}

			code, exited := r.wait(exitBy - time.Since(signalled))
			if !exited {
				t.Fatalf("relay still running %v after %s", exitBy, tt.name)
			}
			took := time.Since(signalled)
			if code != 0 {
				t.Errorf("exit code %d after %s, want 0; stderr:\n%s", code, tt.name, r.stderr.text())
			}
			t.Logf("exited %v after %s", took, tt.name)
			for range inFlight {
				res := <-results
				if res.err != nil || res.code != http.StatusOK || res.body != slow.hello {
					t.Errorf("in-flight request got %d %q, err %v; want 200 %q", res.code, res.body, res.err, slow.hello)
				}
			}
			if _, ok := r.waitLog(0, func(l logLine) bool { return l.Msg() == "stopped" }); !ok {
				t.Error("no \"stopped\" line")
			}
		})
	}
}
