package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"relay/internal/grpctest"
	"relay/internal/testcert"
)

// grpcRelay is relay in front of gRPC backends, with a cleartext listener
// (h2c on) and a TLS one.
type grpcRelay struct {
	*relay
	tlsAddr string
	ca      *testcert.CA
}

// startGRPCRelay starts relay with extra (the pool's keys and backends)
// and TLS certificates from ca.
func startGRPCRelay(t *testing.T, ca *testcert.CA, extra string) *grpcRelay {
	t.Helper()
	pair := ca.Server(t, testcert.ECDSA, "127.0.0.1")
	file := writeConfig(t, "tls_listen: 127.0.0.1:0\nh2c: true\nhealth_check_type: tcp\n"+certsYAML(pair)+extra)
	r, started := startRelay(t, "", "-config", file)
	_, port, err := net.SplitHostPort(started.Str("tls_listen"))
	if err != nil {
		t.Fatalf("relay started without a tls_listen address: %v", started)
	}
	return &grpcRelay{relay: r, tlsAddr: net.JoinHostPort("127.0.0.1", port), ca: ca}
}

// clients returns gRPC clients of relay over h2c and over TLS.
func (g *grpcRelay) clients(t *testing.T) map[string]testgrpc.TestServiceClient {
	_, h2c := grpctest.Dial(t, g.addr, nil)
	_, h2 := grpctest.Dial(t, g.tlsAddr, &tls.Config{RootCAs: g.ca.Pool, ServerName: "127.0.0.1"})
	return map[string]testgrpc.TestServiceClient{"h2c": h2c, "tls": h2}
}

// TestGRPCThroughRelay runs gRPC calls through relay's cleartext and TLS
// listeners to a pool of two h2c backends and one h2 (TLS) backend, with
// one process and with two: every call is balanced, the streaming shapes
// work, trailers arrive, and an HTTP/1.1 client reads the trailers too.
func TestGRPCThroughRelay(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		ca := testcert.NewCA(t)
		plain := []*grpctest.Server{grpctest.Start(t), grpctest.Start(t)}
		secure := grpctest.StartTLS(t, ca.Server(t, testcert.ECDSA, "127.0.0.1").TLS)
		g := startGRPCRelay(t, ca, fmt.Sprintf(`processes: %d
protocol: h2c
backends:
  - url: %s
  - url: %s
  - url: %s
    protocol: h2
    tls_ca_file: %s
`, processes, plain[0].URL, plain[1].URL, secure.URL, ca.File))
		all := append(plain, secure)
		for name, client := range g.clients(t) {
			t.Run(name, func(t *testing.T) {
				before := make([]int64, len(all))
				for i, s := range all {
					before[i] = s.Calls.Load()
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				const calls = 300
				for i := range calls {
					if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 5}); err != nil {
						t.Fatalf("call %d: %v", i, err)
					}
				}
				for i, s := range all {
					// Round robin in each process; with two, each
					// process's share of the calls is its own.
					if n := s.Calls.Load() - before[i]; n < calls/3-calls/10 || n > calls/3+calls/10 {
						t.Errorf("backend %s took %d of %d calls, want about %d", s.URL, n, calls, calls/3)
					}
				}
				st, err := client.FullDuplexCall(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for i := 1; i <= 3; i++ {
					if err := st.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: int32(i * 1000)}}}); err != nil {
						t.Fatal(err)
					}
					if m, err := st.Recv(); err != nil || len(m.GetPayload().GetBody()) != i*1000 {
						t.Fatalf("answer %d: %v", i, err)
					}
				}
				st.CloseSend()
				if _, err := st.Recv(); err != io.EOF {
					t.Fatalf("the stream's end: %v", err)
				}
				if st.Trailer().Get(grpctest.BackendKey+"-trailer") == nil {
					t.Errorf("no trailer from the backend: %v", st.Trailer())
				}
				var tr metadata.MD
				_, err = client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.PermissionDenied), Message: "no"}}, grpcTrailer(&tr))
				if s := status.Convert(err); s.Code() != codes.PermissionDenied || s.Message() != "no" || tr.Get(grpctest.BackendKey+"-trailer") == nil {
					t.Errorf("status %v %q, trailer %v: want the backend's PermissionDenied and its trailer", s.Code(), s.Message(), tr)
				}
			})
		}
		t.Run("HTTP/1.1 client", func(t *testing.T) {
			status, trailer, body := postGRPC(t, g.url("/grpc.testing.TestService/UnaryCall"), &testgrpc.SimpleRequest{ResponseSize: 7})
			if status != 200 || trailer.Get("Grpc-Status") != "0" || trailer.Get(grpctest.BackendKey+"-trailer") == "" {
				t.Errorf("status %d, trailers %v: want 200 and grpc-status 0 in the trailers", status, trailer)
			}
			var resp testgrpc.SimpleResponse
			if len(body) < 5 || proto.Unmarshal(body[5:], &resp) != nil || len(resp.GetPayload().GetBody()) != 7 {
				t.Errorf("body %x is not the answer", body)
			}
		})
	})
}

// postGRPC sends one unary gRPC call over HTTP/1.1 and returns the
// status, the trailers and the body.
func postGRPC(t *testing.T, url string, m proto.Message) (int, http.Header, []byte) {
	t.Helper()
	msg, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	req, err := http.NewRequest("POST", url, bytes.NewReader(append(frame, msg...)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := newClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Trailer, body
}

// TestGRPCLongStreamsAndIdleOnes checks the timeouts of a streaming call:
// a bidirectional stream that exchanges a message every second for 60 s,
// each wait twice response_timeout, is not cut, and one on which nothing
// moves is cut after idle_timeout.
func TestGRPCLongStreamsAndIdleOnes(t *testing.T) {
	t.Parallel()
	s := grpctest.Start(t)
	g := startGRPCRelay(t, testcert.NewCA(t), fmt.Sprintf("response_timeout: 500ms\nidle_timeout: 3s\nprotocol: h2c\nbackends:\n  - url: %s\n", s.URL))
	_, client := grpctest.Dial(t, g.addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st, err := client.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var quiet time.Time // when the stream last moved
	for time.Since(start) < 60*time.Second {
		time.Sleep(time.Second)
		if err := st.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 10}}}); err != nil {
			t.Fatalf("send after %v: %v", time.Since(start), err)
		}
		if _, err := st.Recv(); err != nil {
			t.Fatalf("answer after %v: %v", time.Since(start), err)
		}
		quiet = time.Now()
	}
	// Now nothing moves: relay ends the call after idle_timeout.
	_, err = st.Recv()
	took := time.Since(quiet)
	if err == nil || took < 2500*time.Millisecond || took > 6*time.Second {
		t.Errorf("a quiet stream ended with %v after %v, want an error after about 3s", err, took)
	}
}

// TestGRPCBigStreamHoldsLittle carries a 100 MiB server stream through
// relay and checks that relay's memory stays bounded: flow control holds
// the backend back to what the client takes.
func TestGRPCBigStreamHoldsLittle(t *testing.T) {
	// Not parallel: carrying 100 MiB takes both cores for a second or two,
	// which the latency bounds of tests running beside it would feel.
	s := grpctest.Start(t)
	g := startGRPCRelay(t, testcert.NewCA(t), fmt.Sprintf("protocol: h2c\nbackends:\n  - url: %s\n", s.URL))
	_, client := grpctest.Dial(t, g.addr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Warm up, so the baseline has relay's buffers in it.
	if _, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{ResponseSize: 100 << 10}); err != nil {
		t.Fatal(err)
	}
	base := peakRSS(t, g.cmd.Process.Pid)
	const msg, total = 64 << 10, 100 << 20
	params := make([]*testgrpc.ResponseParameters, total/msg)
	for i := range params {
		params[i] = &testgrpc.ResponseParameters{Size: msg}
	}
	st, err := client.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: params})
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		got += len(m.GetPayload().GetBody())
	}
	if got != total {
		t.Fatalf("got %d bytes, want %d", got, total)
	}
	grew := peakRSS(t, g.cmd.Process.Pid) - base
	t.Logf("relay's peak resident memory grew by %d KiB carrying %d MiB", grew>>10, total>>20)
	if grew > 32<<20 {
		t.Errorf("relay's peak resident memory grew by %d MiB carrying a 100 MiB stream, want under 32", grew>>20)
	}
}

// peakRSS returns the peak resident memory of pid (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// grpcTrailer asks a call for its trailers.
func grpcTrailer(md *metadata.MD) grpc.CallOption { return grpc.Trailer(md) }

// TestGRPCProtocolReloadsLive switches a pool's protocol by reload while
// relay serves: h2c calls work, a reload to http/1.1 makes relay speak
// HTTP/1.1 to the gRPC backend (which fails, as gRPC backends speak only
// HTTP/2), and a reload back to h2c makes calls work again.
func TestGRPCProtocolReloadsLive(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		s := grpctest.Start(t)
		head := fmt.Sprintf("listen: 127.0.0.1:0\nlog_level: info\nh2c: true\nhealth_check_type: tcp\nprocesses: %d\nbackends:\n  - url: %s\n", processes, s.URL)
		file := writeFile(t, t.TempDir(), "relay.yml", head+"protocol: h2c\n")
		r, started := startRelay(t, "", "-config", file)
		admin := adminOf(t, started)
		_, client := grpctest.Dial(t, r.addr, nil)
		call := func() codes.Code {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := client.UnaryCall(ctx, &testgrpc.SimpleRequest{})
			return status.Code(err)
		}
		reload := func(protocol string) {
			if err := writeFileAtomic(file, head+"protocol: "+protocol+"\n"); err != nil {
				t.Fatal(err)
			}
			if code, v := adminCall(t, admin, "POST", "/reload", ""); code != 200 {
				t.Fatalf("POST /reload: %d %v", code, v)
			}
		}
		until := func(what string, want codes.Code) {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for {
				// Several calls in a row, so that each process has
				// applied the reload.
				ok := true
				for range 6 {
					ok = ok && call() == want
				}
				if ok {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: calls do not end with %v", what, want)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		until("h2c", codes.OK)
		reload("http/1.1")
		until("reloaded to http/1.1", codes.Unavailable)
		reload("h2c")
		until("reloaded back to h2c", codes.OK)
	})
}
