package health

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"relay/internal/backend"
	"relay/internal/fds"
	"relay/internal/testaddr"
)

// A probe takes its descriptor from the process's budget. With none left
// the backend is not probed and keeps its state; a probe that keeps its
// connection keeps its place until the checker lets the connection go.
func TestProbesTakeTheirDescriptorsFromTheBudget(t *testing.T) {
	var asked atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if asked.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // a probe that gets through marks the backend down
		}
	}))
	t.Cleanup(s.Close)
	b := newBackend(t, s.URL)
	cfg := Config{Interval: time.Hour, Timeout: 5 * time.Second, Rise: 1, Fall: 1, ReuseConnection: true}

	budget := fds.New(1)
	budget.Take() // spent
	c, err := New(cfg, []*backend.Backend{b}, nil, WithDescriptors(budget))
	if err != nil {
		t.Fatal(err)
	}
	c.CheckAll(context.Background())
	if asked.Load() != 0 || !b.Healthy() {
		t.Fatalf("with no descriptor left: %d probes reached the backend, healthy %v; want none, and its state kept", asked.Load(), b.Healthy())
	}
	c.Stop()

	budget.Give()
	c, err = New(cfg, []*backend.Backend{b}, nil, WithDescriptors(budget))
	if err != nil {
		t.Fatal(err)
	}
	c.CheckAll(context.Background())
	if asked.Load() != 1 || b.Healthy() {
		t.Fatalf("with a descriptor: %d probes, healthy %v; want one, answered 503", asked.Load(), b.Healthy())
	}
	if budget.Used() != 0 {
		t.Fatalf("a probe answered 503, whose connection is not kept, holds %d places, want 0", budget.Used())
	}
	c.CheckAll(context.Background())
	if asked.Load() != 2 || !b.Healthy() {
		t.Fatalf("%d probes, healthy %v; want a second one, answered 200", asked.Load(), b.Healthy())
	}
	if budget.Used() != 1 {
		t.Fatalf("the kept probe connection holds %d places, want 1", budget.Used())
	}
	c.Stop()
	if budget.Used() != 0 {
		t.Fatalf("after Stop %d places are held, want 0", budget.Used())
	}
}

// A probe the system refuses a descriptor (EMFILE) is relay's shortage:
// the backend is not marked down for it.
func TestDescriptorShortageIsNotTheBackendsFailure(t *testing.T) {
	b := newBackend(t, "http://10.0.0.1:80")
	probe := func(context.Context, *backend.Backend) error {
		return fmt.Errorf("health check GET http://10.0.0.1:80/health: dial tcp: socket: %w", syscall.EMFILE)
	}
	c, err := New(Config{Interval: time.Hour, Timeout: time.Second, Rise: 1, Fall: 1}, []*backend.Backend{b}, nil, WithProbe(probe))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	c.CheckAll(context.Background())
	if !b.Healthy() {
		t.Fatal("the backend was marked down for relay's own EMFILE")
	}
}

// A probe that keeps its connection keeps its place only while it has a
// connection kept: one whose backend refuses connections, or whose answer
// leaves nothing to keep, gives its place back. Otherwise every backend
// that is down would hold a place with no descriptor under it, and a few
// hundred of them would spend the budget, leaving clients refused.
func TestKeptProbeWithNothingKeptHoldsNoPlace(t *testing.T) {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(s.Close)
	closing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // nothing to keep
	}))
	t.Cleanup(closing.Close)
	const dead = 20
	bs := []*backend.Backend{newBackend(t, s.URL), newBackend(t, closing.URL)}
	for i := range dead {
		bs = append(bs, newBackend(t, fmt.Sprintf("http://%s/%d", testaddr.Refused(t), i)))
	}
	budget := fds.New(100)
	c, err := New(Config{Interval: time.Hour, Timeout: 5 * time.Second, Rise: 1, Fall: 1, ReuseConnection: true},
		bs, nil, WithDescriptors(budget))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	c.CheckAll(context.Background())
	if !bs[0].Healthy() || !bs[1].Healthy() || bs[2].Healthy() {
		t.Fatalf("healthy: live %v, closing %v, dead %v; want true, true, false", bs[0].Healthy(), bs[1].Healthy(), bs[2].Healthy())
	}
	if n := budget.Used(); n != 1 {
		t.Fatalf("%d places held with one probe connection kept (and %d backends refusing connections); want 1", n, dead)
	}
}
