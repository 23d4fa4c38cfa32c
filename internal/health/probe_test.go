package health

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/testaddr"
)

func TestHTTPProbe(t *testing.T) {
	// Cases meant to time out get a short timeout; the others a long one, so
	// a loaded machine does not turn a pass into a timeout.
	const short, long = 300 * time.Millisecond, 10 * time.Second
	tests := []struct {
		name    string
		handler http.HandlerFunc
		timeout time.Duration
		pass    bool
		errHas  string
	}{
		{name: "200 passes", pass: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("ok\n"))
		}},
		{name: "204 passes", pass: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		}},
		{name: "500 fails", errHas: "status 500", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "broken", http.StatusInternalServerError)
		}},
		{name: "503 fails", errHas: "status 503", handler: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
		}},
		{name: "a redirect is not followed and fails", errHas: "status 302", handler: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}},
		{name: "a slow head times out", timeout: short, errHas: "deadline exceeded", handler: func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}},
		{name: "a 200 whose body stalls fails", timeout: short, errHas: "reading body", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.Write([]byte("partial"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}},
		{name: "a large body is read only in part and passes", pass: true, handler: func(w http.ResponseWriter, r *http.Request) {
			chunk := make([]byte, 32<<10)
			for range 1 << 10 { // 32 MiB unless the client goes away
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}},
	}
	for _, tt := range tests {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keep=%v", tt.name, keep), func(t *testing.T) {
				srv := httptest.NewServer(tt.handler)
				defer srv.Close()
				b := newBackend(t, srv.URL)
				timeout := cmp.Or(tt.timeout, long)
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				start := time.Now()
				h := newHTTPCheck(b, "/health", keep, newReadBufs())
				defer h.closeIdle()
				err := h.probe(ctx)
				if took := time.Since(start); took > timeout+2*time.Second {
					t.Errorf("probe took %v with a timeout of %v", took, timeout)
				}
				if tt.pass {
					if err != nil {
						t.Fatalf("probe failed: %v", err)
					}
					return
				}
				if err == nil {
					t.Fatal("probe passed")
				}
				if !strings.Contains(err.Error(), tt.errHas) {
					t.Errorf("error %q does not mention %q", err, tt.errHas)
				}
			})
		}
	}
}

// TestHTTPProbeRequest checks what the backend sees: the configured target,
// the Host of the backend's URL although the address dialled differs, and a
// new connection per probe.
func TestHTTPProbeRequest(t *testing.T) {
	type seen struct{ host, target, method string }
	reqs := make(chan seen, 3)
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs <- seen{r.Host, r.URL.RequestURI(), r.Method}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	u, _ := url.Parse("http://app.example:8080")
	b := &backend.Backend{Host: &backend.Host{URL: u, Name: "http://app.example:8080", Addr: srv.Listener.Addr().String()}, Weight: 1}
	probe := newHTTPCheck(b, "/status?full=1", false, newReadBufs()).probe
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := probe(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		got := <-reqs
		want := seen{"app.example:8080", "/status?full=1", http.MethodGet}
		if got != want {
			t.Errorf("backend saw %+v, want %+v", got, want)
		}
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("3 probes used %d connections, want a fresh one each", n)
	}
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			accepted <- struct{}{}
		}
	}()

	tests := []struct {
		name string
		addr string
		pass bool
	}{
		{name: "listening port passes", addr: ln.Addr().String(), pass: true},
		{name: "closed port fails", addr: closedAddr(t)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t, "http://"+tt.addr)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := tcpProbe(ctx, b)
			if tt.pass != (err == nil) {
				t.Fatalf("pass=%v, want %v (err %v)", err == nil, tt.pass, err)
			}
			if tt.pass {
				<-accepted
			} else if !strings.Contains(err.Error(), tt.addr) {
				t.Errorf("error %q does not name %s", err, tt.addr)
			}
		})
	}
}

// TestCheckAllOverTCP runs the start-up round with the probes New chooses
// for each check type, against a live HTTP server, a raw TCP listener that
// speaks no HTTP, and a closed port.
func TestCheckAllOverTCP(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			http.NotFound(w, r)
		}
	}))
	defer web.Close()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	go func() {
		for {
			c, err := raw.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	dead := "http://" + closedAddr(t)

	tests := []struct {
		name, typ, path string
		want            map[string]bool // backend URL → healthy after CheckAll
	}{
		{name: "http", typ: TypeHTTP, want: map[string]bool{web.URL: true, "http://" + raw.Addr().String(): false, dead: false}},
		{name: "http wrong path", typ: TypeHTTP, path: "/nope", want: map[string]bool{web.URL: false}},
		{name: "tcp", typ: TypeTCP, want: map[string]bool{web.URL: true, "http://" + raw.Addr().String(): true, dead: false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bs []*backend.Backend
			for u := range tt.want {
				bs = append(bs, newBackend(t, u))
			}
			var mu sync.Mutex
			reported := map[string]bool{}
			onChange := func(b *backend.Backend, healthy bool) {
				mu.Lock()
				defer mu.Unlock()
				reported[b.Name] = healthy
			}
			cfg := Config{Type: tt.typ, Path: tt.path, Interval: time.Minute, Timeout: 2 * time.Second, Rise: 2, Fall: 3}
			c, err := New(cfg, bs, onChange)
			if err != nil {
				t.Fatal(err)
			}
			c.CheckAll(context.Background())
			c.Stop()
			for _, b := range bs {
				want := tt.want[b.Name]
				if b.Healthy() != want {
					t.Errorf("%s healthy=%v, want %v", b, b.Healthy(), want)
				}
				if got, ok := reported[b.Name]; ok != !want || (ok && got) {
					t.Errorf("%s: reported=%v (healthy=%v); want a report only of going down", b, ok, got)
				}
			}
		})
	}
}

// closedAddr returns a loopback address that refuses connections for the
// whole test.
func closedAddr(t *testing.T) string { return testaddr.Refused(t) }
