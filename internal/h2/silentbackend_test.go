package h2

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"relay/internal/core"
	"relay/internal/grpctest"
)

// TestSilentH2BackendBoundedByTheClientsStreams sends 200 gRPC calls at
// once on one client connection to an h2c pool whose backend takes every
// stream and never answers. The door lets 20 streams in at a time, so the
// backend never holds more than 20, relay's goroutines stay within a
// bound set by those 20, and every call ends with relay's
// DEADLINE_EXCEEDED at response_timeout, its stream at the backend reset.
func TestSilentH2BackendBoundedByTheClientsStreams(t *testing.T) {
	const calls, streams = 200, 20
	const timeout = 300 * time.Millisecond
	var active, peak atomic.Int64
	be := startH2CBackend(t, 1000, func(w http.ResponseWriter, r *http.Request) {
		n := active.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-r.Context().Done()
		active.Add(-1)
	})
	lim := testLimits()
	lim.MaxConcurrentStreams = streams
	f := startFrontOpts(t, testBodyTime, lim, frontOptions{pool: func(pc *core.PoolConfig) {
		pc.Protocol = core.H2C
		pc.ResponseTimeout = timeout
	}}, backendAt(t, be.URL))
	_, client := grpctest.Dial(t, f.addr, nil)
	// Connected before the goroutines are counted.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	client.EmptyCall(ctx, &testgrpc.Empty{})
	cancel()
	base := runtime.NumGoroutine()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var wrong []string
	start := time.Now()
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 4*ioTimeout)
			defer cancel()
			_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 1})
			mu.Lock()
			defer mu.Unlock()
			if st := status.Convert(err); st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), "in time") {
				wrong = append(wrong, st.String())
			}
		}()
	}
	// The client's 200 goroutines are the test's; relay's own must stay
	// within a bound set by the 20 streams in at once.
	maxG := 0
	for !waitGroup(&wg, 20*time.Millisecond) {
		maxG = max(maxG, runtime.NumGoroutine())
		if time.Since(start) > 4*ioTimeout {
			t.Fatal("calls hang")
		}
	}
	took := time.Since(start)
	if len(wrong) > 0 {
		t.Errorf("%d of %d calls ended otherwise than DEADLINE_EXCEEDED for want of an answer, first: %s", len(wrong), calls, wrong[0])
	}
	// The backend counts a call until its handler has seen the reset, on
	// a goroutine of its own, so a call relay reset may still count while
	// the next one, sent after the reset, starts: a few over the door's
	// limit are the backend's lag. Without the bound it would hold all
	// 200.
	if p := peak.Load(); p > streams+streams/4 {
		t.Errorf("the backend held %d calls at once, want at most the door's %d streams (and a few resets in flight)", p, streams)
	}
	// 200 calls, 20 at a time, 300 ms each: about 3 s.
	if min := timeout * calls / streams; took < min || took > 3*min {
		t.Errorf("the calls took %v, want about %v", took, min)
	}
	if extra := maxG - base - calls; extra > 12*streams {
		t.Errorf("goroutines rose by %d beyond the clients' %d, want at most %d", extra, calls, 12*streams)
	}
	t.Logf("backend peak %d streams; goroutines %d at rest, %d at most; %v", peak.Load(), base, maxG, took)
	waitUntil(t, "the backend's streams reset", func() bool { return active.Load() == 0 })
}
