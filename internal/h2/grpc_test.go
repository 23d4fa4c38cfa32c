package h2

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"relay/internal/backend"
	"relay/internal/core"
	"relay/internal/grpctest"
)

// grpcFront serves a pool of h2c gRPC backends through relay's HTTP/2
// front door and returns a gRPC client of it.
func grpcFront(t *testing.T, n int, pool func(*core.PoolConfig)) ([]*grpctest.Server, testgrpc.TestServiceClient) {
	t.Helper()
	srvs := make([]*grpctest.Server, n)
	bs := make([]*backend.Backend, n)
	for i := range srvs {
		srvs[i] = grpctest.Start(t)
		bs[i] = backendAt(t, srvs[i].URL)
	}
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) {
		pc.Protocol = core.H2C
		if pool != nil {
			pool(pc)
		}
	}}, bs...)
	_, client := grpctest.Dial(t, f.addr, nil)
	return srvs, client
}

// TestGRPCCallsBalancedOneByOne checks that relay balances every call,
// not every connection: 3,000 unary calls a client makes over its one
// connection spread over three backends a third each.
func TestGRPCCallsBalancedOneByOne(t *testing.T) {
	srvs, client := grpcFront(t, 3, nil)
	const calls, workers = 3000, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < calls; i += workers {
				ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
				_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 10})
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("call failed: %v", err)
	}
	for _, s := range srvs {
		if n := s.Calls.Load(); n < 950 || n > 1050 {
			t.Errorf("backend %s took %d of %d calls, want 1000 ± 5%%", s.Addr, n, calls)
		}
	}
}

// TestGRPCStreamingShapes runs the three streaming shapes through relay,
// with metadata both ways and the backend's trailers.
func TestGRPCStreamingShapes(t *testing.T) {
	_, client := grpcFront(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()

	t.Run("server", func(t *testing.T) {
		st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{
			{Size: 1}, {Size: 100}, {Size: 70000, IntervalUs: 1000}, {Size: 3}}})
		if err != nil {
			t.Fatal(err)
		}
		var sizes []int
		for {
			m, err := st.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(m.GetPayload().GetBody()))
		}
		if len(sizes) != 4 || sizes[0] != 1 || sizes[1] != 100 || sizes[2] != 70000 || sizes[3] != 3 {
			t.Errorf("message sizes %v, want [1 100 70000 3]", sizes)
		}
		if st.Trailer().Get(grpctest.BackendKey+"-trailer") == nil {
			t.Errorf("the backend's trailer did not arrive: %v", st.Trailer())
		}
	})
	t.Run("client", func(t *testing.T) {
		st, err := client.StreamingInputCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{5, 50000, 7} {
			if err := st.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, n)}}); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := st.CloseAndRecv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.AggregatedPayloadSize != 50012 {
			t.Errorf("aggregated %d, want 50012", resp.AggregatedPayloadSize)
		}
	})
	t.Run("bidirectional", func(t *testing.T) {
		st, err := client.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 5; i++ {
			// Each answer comes before the next message is sent: the
			// request body and the response flow at once.
			if err := st.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: int32(i)}}}); err != nil {
				t.Fatal(err)
			}
			m, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if len(m.GetPayload().GetBody()) != i {
				t.Fatalf("answer %d has %d bytes", i, len(m.GetPayload().GetBody()))
			}
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Recv(); err != io.EOF {
			t.Fatalf("after the last answer: %v, want the end", err)
		}
	})
	t.Run("metadata and status", func(t *testing.T) {
		var hd, tr metadata.MD
		mctx := metadata.AppendToOutgoingContext(ctx, "x-echo", "one", "x-echo", "two")
		_, err := client.UnaryCall(mctx, &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.NotFound), Message: "no such thing: ünïcode"}},
			grpc.Header(&hd), grpc.Trailer(&tr))
		if s := status.Convert(err); s.Code() != codes.NotFound || s.Message() != "no such thing: ünïcode" {
			t.Errorf("status %v %q, want NotFound with the backend's message", s.Code(), s.Message())
		}
		if got := hd.Get("x-echo"); len(got) != 2 || got[0] != "one" || got[1] != "two" {
			t.Errorf("echoed metadata %v, want [one two]", got)
		}
		if tr.Get(grpctest.BackendKey+"-trailer") == nil {
			t.Errorf("the backend's trailer did not arrive with an error status: %v", tr)
		}
	})
}

// TestGRPCErrorsAreGRPCShaped checks relay's own answers to gRPC calls:
// a status a gRPC client reads, not an HTML error.
func TestGRPCErrorsAreGRPCShaped(t *testing.T) {
	t.Run("no backend up", func(t *testing.T) {
		f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) { pc.Protocol = core.H2C }}, deadBackend(t))
		_, client := grpctest.Dial(t, f.addr, nil)
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		// relay's own message, which a gRPC client reads only from a
		// grpc-message: from an HTTP 503 it would make up its own.
		if s := status.Convert(err); s.Code() != codes.Unavailable || !strings.HasPrefix(s.Message(), "Service Unavailable: no backend") {
			t.Errorf("status %v %q, want Unavailable with relay's message", s.Code(), s.Message())
		}
	})
	t.Run("queue full", func(t *testing.T) {
		srvs, client := grpcFront(t, 1, func(pc *core.PoolConfig) { pc.MaxRequests, pc.MaxQueued = 1, 0 })
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := client.UnaryCall(metadata.AppendToOutgoingContext(ctx, grpctest.SleepKey, "1s"), &testgrpc.SimpleRequest{})
			done <- err
		}()
		waitUntil(t, "the first call at the backend", func() bool { return srvs[0].Calls.Load() == 1 })
		_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if s := status.Convert(err); s.Code() != codes.ResourceExhausted {
			t.Errorf("status %v %q, want ResourceExhausted", s.Code(), s.Message())
		}
		if err := <-done; err != nil {
			t.Errorf("the first call: %v", err)
		}
	})
	t.Run("deadline capped by relay", func(t *testing.T) {
		srvs, client := grpcFront(t, 1, func(pc *core.PoolConfig) { pc.MaxGRPCTimeout = 200 * time.Millisecond })
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, grpctest.SleepKey, "5s")
		start := time.Now()
		_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if s := status.Convert(err); s.Code() != codes.DeadlineExceeded {
			t.Errorf("status %v %q, want DeadlineExceeded", s.Code(), s.Message())
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("the call took %v past relay's cap of 200ms", took)
		}
		waitUntil(t, "the backend's call cancelled", func() bool { return srvs[0].Cancelled.Load() == 1 })
	})
	t.Run("client deadline", func(t *testing.T) {
		srvs, client := grpcFront(t, 1, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, grpctest.SleepKey, "5s")
		_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		if s := status.Convert(err); s.Code() != codes.DeadlineExceeded {
			t.Errorf("status %v %q, want DeadlineExceeded", s.Code(), s.Message())
		}
		waitUntil(t, "the backend's call cancelled", func() bool { return srvs[0].Cancelled.Load() == 1 })
	})
}

// TestGRPCCancelReachesTheBackend checks that a client that cancels a
// call cancels it on the backend within a second.
func TestGRPCCancelReachesTheBackend(t *testing.T) {
	srvs, client := grpcFront(t, 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	st, err := client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	start := time.Now()
	waitUntil(t, "the backend's call cancelled", func() bool { return srvs[0].Cancelled.Load() == 1 })
	if took := time.Since(start); took > time.Second {
		t.Errorf("the backend learnt of the cancel after %v, want within 1s", took)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Canceled && !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: %v", err)
	}
}

// TestGRPCGoAwayUnderLoadLosesNoCall stops a backend gracefully (GOAWAY)
// while calls flow: every call succeeds, and the backends together took
// each call once, so a stream above the GOAWAY's last stream id went to
// another backend and none was lost or doubled.
func TestGRPCGoAwayUnderLoadLosesNoCall(t *testing.T) {
	srvs, client := grpcFront(t, 3, nil)
	const workers, calls = 8, 600
	var wg sync.WaitGroup
	var made sync.WaitGroup
	made.Add(calls / 3)
	errs := make(chan error, calls)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < calls; i += workers {
				ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
				_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 10})
				cancel()
				if err != nil {
					errs <- err
				}
				if i < calls/3 {
					made.Done()
				}
			}
		}()
	}
	made.Wait()
	stopped := make(chan struct{})
	go func() {
		srvs[0].GracefulStop()
		close(stopped)
	}()
	wg.Wait()
	<-stopped
	close(errs)
	failed := 0
	for err := range errs {
		failed++
		if failed <= 3 {
			t.Errorf("call failed: %v", err)
		}
	}
	var took int64
	for _, s := range srvs {
		took += s.Calls.Load()
	}
	if failed > 0 || took != calls {
		t.Errorf("%d calls failed; the backends took %d calls of %d", failed, took, calls)
	}
}

// TestGRPCBackendKilledMidStream cuts a backend's connections while a
// server stream is running: the client learns of it at once, and later
// calls are served.
func TestGRPCBackendKilledMidStream(t *testing.T) {
	srvs, client := grpcFront(t, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
	defer cancel()
	params := make([]*testgrpc.ResponseParameters, 100)
	for i := range params {
		params[i] = &testgrpc.ResponseParameters{Size: 10, IntervalUs: 50000}
	}
	st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: params})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	hd, err := st.Header()
	if err != nil || len(hd.Get(grpctest.BackendKey)) == 0 {
		t.Fatalf("header %v, %v: no backend named", hd, err)
	}
	victim := srvs[0]
	if hd.Get(grpctest.BackendKey)[0] != victim.Addr {
		victim = srvs[1]
	}
	victim.Cut()
	start := time.Now()
	for {
		if _, err = st.Recv(); err != nil {
			break
		}
	}
	if s := status.Convert(err); s.Code() == codes.OK || time.Since(start) > 2*time.Second {
		t.Errorf("the cut stream ended with %v after %v, want an error at once", err, time.Since(start))
	}
	for i := range 20 {
		if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); err != nil {
			t.Fatalf("call %d after the cut: %v", i, err)
		}
	}
}

// TestGRPCStatusesOpenBreakers checks that a backend answering a
// grpc-status listed in BreakerGRPCStatuses is taken out as one answering
// 503 is, while other statuses count as answers.
func TestGRPCStatusesOpenBreakers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listed []int
		most   int64 // the most calls the failing backend may take
	}{
		{"listed", []int{14}, 3},
		{"not listed", nil, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srvs, client := grpcFront(t, 2, func(pc *core.PoolConfig) {
				pc.BreakerFailures, pc.BreakerOpenTime, pc.BreakerGRPCStatuses = 3, time.Minute, tc.listed
				pc.Retries, pc.MaxEjectedPercent = 0, 50
			})
			srvs[0].Fail.Store(int32(codes.Unavailable))
			ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
			defer cancel()
			failed := 0
			for range 20 {
				if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{}); status.Code(err) == codes.Unavailable {
					failed++
				}
			}
			if n := srvs[0].Calls.Load(); (tc.listed != nil && n > tc.most) || (tc.listed == nil && n != tc.most) {
				t.Errorf("the backend answering UNAVAILABLE took %d of 20 calls (%d failed), want %s %d", n, failed,
					map[bool]string{true: "at most", false: "exactly"}[tc.listed != nil], tc.most)
			}
		})
	}
}
