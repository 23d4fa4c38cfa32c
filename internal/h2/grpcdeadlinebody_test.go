package h2

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"

	"relay/internal/core"
	"relay/internal/grpctest"
)

// TestCallDeadlineInTheBodyIsNotTheBackendsFault checks that a call relay
// ends at its deadline while the response streams counts against nobody,
// as one ended before its head does: the deadline is the call's, and a
// backend still streaming when it passes has done nothing wrong. Counted
// as the backend's failure, a service of long server streams would trip
// its backends' breakers.
func TestCallDeadlineInTheBodyIsNotTheBackendsFault(t *testing.T) {
	srv := grpctest.Start(t)
	b := backendAt(t, srv.URL)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{pool: func(pc *core.PoolConfig) {
		pc.Protocol = core.H2C
		pc.MaxGRPCTimeout = 300 * time.Millisecond
	}}, b)
	_, client := grpctest.Dial(t, f.addr, nil)
	params := make([]*testgrpc.ResponseParameters, 40)
	for i := range params {
		params[i] = &testgrpc.ResponseParameters{Size: 10, IntervalUs: 50_000}
	}
	for call := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		stream, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: params})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		got := 0
		for {
			if _, err = stream.Recv(); err != nil {
				break
			}
			got++
		}
		cancel()
		if got == 0 || got == len(params) {
			t.Fatalf("call %d: %d messages of %d before it ended (%v); want it cut in its body", call, got, len(params), err)
		}
		if c := status.Code(err); c != codes.DeadlineExceeded && c != codes.Canceled && c != codes.Internal {
			t.Fatalf("call %d ended with %v, want the deadline's end", call, err)
		}
	}
	waitUntil(t, "the calls to end at relay", func() bool { return b.InFlight() == 0 })
	if n := b.Failures(); n != 0 {
		t.Errorf("the backend has %d failures from calls its deadline ended, want 0", n)
	}
	if until := b.State().EjectedUntil; !until.IsZero() {
		t.Errorf("the backend is ejected until %v, want it in", until)
	}
}
