package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"

	"relay/internal/fds"
)

// With the process's descriptor budget spent, a new client connection is
// accepted, told 503 and closed: the listener keeps taking clients instead
// of failing with EMFILE, and serves again once places are free.
func TestSpentBudgetAnswersNewConnections503(t *testing.T) {
	hb := newHTTPBackend(t, "a", 1, nil)
	budget := fds.New(4)
	r := startRelay(t, Config{Descriptors: budget}, backendsOf(hb)...)
	for range 4 {
		budget.Take()
	}
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer on a connection accepted without a descriptor: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "file descriptors") {
		t.Fatalf("got %d %q (Retry-After %q); want 503 saying relay is out of file descriptors", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	for range 4 {
		budget.Give()
	}
	client := newClient(t, 1, "")
	if res := get(t, client, r.url+"/"); res.status != 200 {
		t.Fatalf("with places free again: %d, want 200", res.status)
	}
	if n := budget.Used(); n != 2 {
		t.Fatalf("a client connection and its idle upstream connection hold %d places, want 2", n)
	}
	client.CloseIdleConnections()
	r.p.core.CloseIdle()
	eventually(t, "every place to be given back", func() bool { return budget.Used() == 0 })
}

// A request relay has no descriptor to forward on is answered 503, and the
// backend is not blamed: its breaker stays closed, however many requests
// are refused, whether the budget refused the descriptor or the system did
// (EMFILE from the dial).
func TestOwnDescriptorShortageDoesNotTripTheBreaker(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget *fds.Budget
		dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	}{
		{"budget spent", fds.New(1), nil},
		{"EMFILE", nil, func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: network, Err: fmt.Errorf("socket: %w", syscall.EMFILE)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb := newHTTPBackend(t, "a", 1, nil)
			cfg := Config{Descriptors: tc.budget}
			cfg.Pool.BreakerFailures = 2
			cfg.Pool.Dial = tc.dial
			r := startRelay(t, cfg, backendsOf(hb)...)
			client := newClient(t, 1, "")
			for i := range 5 {
				res := get(t, client, r.url+"/")
				if res.status != 503 || !strings.Contains(res.body, "file descriptors") {
					t.Fatalf("request %d: %d %q; want 503 saying relay is out of file descriptors", i, res.status, res.body)
				}
			}
			b := r.p.pool().Backends()[0]
			if b.Ejected() || b.Failures() != 0 {
				t.Fatalf("the backend was blamed for relay's shortage: ejected %v, %d failures", b.Ejected(), b.Failures())
			}
		})
	}
}

// Idle pooled upstream connections are kept only in case they are needed
// again: with the budget spent, relay closes one to make room rather than
// refuse a client. After a burst has left idle connections behind, new
// clients are served, not answered 503 until the pool's idle timeout.
func TestIdlePooledConnectionsMakeRoomForClients(t *testing.T) {
	const burst = 4
	gate := make(chan struct{})
	var held sync.WaitGroup
	held.Add(burst)
	hb := newHTTPBackend(t, "a", 1, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/held" {
			held.Done()
			<-gate
		}
		io.WriteString(w, "ok")
	})
	budget := fds.New(2 * burst)
	r := startRelay(t, Config{Descriptors: budget}, backendsOf(hb)...)
	// A burst of burst requests at once: a client connection and an
	// upstream connection each, the whole budget.
	var wg sync.WaitGroup
	for range burst {
		wg.Go(func() {
			c, br := dialRelay(t, r)
			write(t, c, "GET /held HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			readResponse(t, br, "GET")
			c.Close()
		})
	}
	held.Wait()
	close(gate)
	wg.Wait()
	eventually(t, "the burst's clients to be gone, its upstream connections pooled", func() bool {
		return r.p.Connections() == 0 && budget.Used() == burst
	})
	// More clients than the places the idle connections leave, each
	// asking in turn.
	conns := make([]net.Conn, burst+2)
	brs := make([]*bufio.Reader, len(conns))
	for i := range conns {
		conns[i], brs[i] = dialRelay(t, r)
	}
	for i, c := range conns {
		write(t, c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := readResponse(t, brs[i], "GET"); resp.StatusCode != 200 {
			t.Fatalf("client %d of %d, with %d idle upstream connections pooled: %d %q; want 200",
				i+1, len(conns), burst, resp.StatusCode, body)
		}
	}
}
