package h2

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"

	"relay/internal/backend"
	"relay/internal/core"
	"relay/internal/fds"
	"relay/internal/grpctest"
)

// TestGRPCCancelledAtEveryStageLeavesNothing cancels 200 calls from four
// gRPC clients at random points: unary calls before the backend answers
// or as it does, client and bidirectional streams while the request body
// is still open, and server and bidirectional streams partway through the
// response. Afterwards every backend call has ended, no backend counts a
// request in flight, relay's upstream connections (and their places in
// the descriptor budget) are all given back once idle, and the goroutines
// are back near where they were.
func TestGRPCCancelledAtEveryStageLeavesNothing(t *testing.T) {
	const nBackends, nClients, calls, workers = 3, 4, 200, 20
	srvs := make([]*grpctest.Server, nBackends)
	bs := make([]*backend.Backend, nBackends)
	for i := range srvs {
		srvs[i] = grpctest.Start(t)
		bs[i] = backendAt(t, srvs[i].URL)
	}
	budget := fds.New(10000)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{descriptors: budget, pool: func(pc *core.PoolConfig) {
		pc.Protocol = core.H2C
		pc.IdleTimeout = 300 * time.Millisecond
	}}, bs...)
	clients := make([]testgrpc.TestServiceClient, nClients)
	for i := range clients {
		_, clients[i] = grpctest.Dial(t, f.addr, nil)
		// Connected and warm before the goroutines are counted.
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		if _, err := clients[i].EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	waitUntil(t, "the warm-up's upstream connections closed", func() bool { return budget.Used() == 0 })
	before := runtime.NumGoroutine()

	var wg sync.WaitGroup
	var mu sync.Mutex
	unexpected := 0
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 28))
			for i := w; i < calls; i += workers {
				c := clients[i%nClients]
				if err := cancelledCall(c, rng, i%4); err != nil {
					mu.Lock()
					unexpected++
					if unexpected <= 5 {
						t.Errorf("call %d (shape %d): %v", i, i%4, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	if !waitGroup(&wg, 4*ioTimeout) {
		t.Fatal("the calls did not end")
	}
	waitUntil(t, "every backend call ended", func() bool {
		for _, s := range srvs {
			if s.Active.Load() != 0 {
				return false
			}
		}
		return true
	})
	waitUntil(t, "no backend counting a request in flight", func() bool {
		for _, b := range bs {
			if b.InFlight() != 0 {
				return false
			}
		}
		return true
	})
	waitUntil(t, "relay's upstream connections closed and their descriptors given back", func() bool { return budget.Used() == 0 })
	// Runners waiting for the clients' next streams stay, a bounded
	// number per connection (runner.go).
	waitUntil(t, "the goroutines back to where they were", func() bool { return runtime.NumGoroutine()-f.idleRunners() <= before+5 })
	var took, cancelled int64
	for _, s := range srvs {
		took += s.Calls.Load()
		cancelled += s.Cancelled.Load()
	}
	t.Logf("backends took %d calls, %d of them cancelled there", took-nClients, cancelled)
}

// cancelledCall makes one call of the given shape and cancels it at a
// random point. It returns an error only for an outcome a cancel cannot
// explain.
func cancelledCall(c testgrpc.TestServiceClient, rng *rand.Rand, shape int) (err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	guard := time.AfterFunc(ioTimeout, cancel) // nothing waits for ever
	defer func() {
		if !guard.Stop() {
			err = fmt.Errorf("the call hung for %v", time.Since(start))
		}
	}()
	switch shape {
	case 0:
		// Unary: cancelled before the backend answers, or about when it
		// does.
		ctx = metadata.AppendToOutgoingContext(ctx, grpctest.SleepKey, (time.Duration(20+rng.IntN(200)) * time.Millisecond).String())
		t := time.AfterFunc(time.Duration(rng.IntN(200))*time.Millisecond, cancel)
		defer t.Stop()
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 100})
		return tolerated(ctx, err)
	case 1:
		// Server stream: cancelled partway through the response.
		params := make([]*testgrpc.ResponseParameters, 20)
		for i := range params {
			params[i] = &testgrpc.ResponseParameters{Size: int32(1 + rng.IntN(40000)), IntervalUs: 5000}
		}
		st, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: params})
		if err != nil {
			return tolerated(ctx, err)
		}
		for range rng.IntN(10) {
			if _, err := st.Recv(); err != nil {
				return err
			}
		}
		cancel()
		_, err = st.Recv()
		return tolerated(ctx, err)
	case 2:
		// Client stream: cancelled while the request body is open.
		st, err := c.StreamingInputCall(ctx)
		if err != nil {
			return tolerated(ctx, err)
		}
		for range rng.IntN(6) {
			if err := st.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, rng.IntN(70000))}}); err != nil {
				return tolerated(ctx, err)
			}
		}
		cancel()
		_, err = st.CloseAndRecv()
		return tolerated(ctx, err)
	default:
		// Bidirectional: cancelled with both ways open, after some
		// answers, some of them perhaps still on their way.
		st, err := c.FullDuplexCall(ctx)
		if err != nil {
			return tolerated(ctx, err)
		}
		sent := rng.IntN(6)
		for range sent {
			if err := st.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: int32(rng.IntN(50000))}}}); err != nil {
				return tolerated(ctx, err)
			}
		}
		for range rng.IntN(sent + 1) {
			if _, err := st.Recv(); err != nil {
				return err
			}
		}
		cancel()
		_, err = st.Recv()
		if err == io.EOF {
			return nil
		}
		return tolerated(ctx, err)
	}
}

// tolerated returns err unless the call's cancel explains it (or there
// is none).
func tolerated(ctx context.Context, err error) error {
	if err == nil || ctx.Err() != nil {
		return nil
	}
	return err
}
