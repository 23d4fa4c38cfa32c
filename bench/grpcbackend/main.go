// Command grpcbackend is the gRPC side of bench/grpc.sh: the backends the
// balancers spread calls over, the one-shot client that checks a balancer
// answers real gRPC calls, and the writer of the request h2load sends.
//
// It serves the unary method grpc.testing.TestService/UnaryCall of gRPC's
// own interop service (google.golang.org/grpc/interop/grpc_testing), so no
// .proto file or protoc is needed. Each call is answered with a payload of
// the size the request asks for and, when the request sets fill_server_id,
// the port of the backend that served it.
//
//	grpcbackend -serve 127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103 -stats 127.0.0.1:9100
//	    serves h2c (gRPC over cleartext HTTP/2, prior knowledge) on every
//	    address, and GET /counts on -stats: one line "ADDRESS CALLS" per
//	    address, the calls each has served since it started. On SIGTERM or
//	    SIGINT it prints the same lines and exits.
//	grpcbackend -check 127.0.0.1:8080 -calls 30
//	    makes that many unary calls one after another over one connection,
//	    checks each ends with grpc-status 0 (OK) and the payload asked for,
//	    and prints how many each backend served; exits 1 on any failure.
//	grpcbackend -write-request FILE -size 100
//	    writes one length-prefixed gRPC message (the 5-byte prefix and the
//	    protobuf bytes of a SimpleRequest with a payload of -size bytes that
//	    asks for as many back) for h2load -d FILE.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func main() {
	serve := flag.String("serve", "", "comma-separated addresses to serve gRPC (h2c) on")
	stats := flag.String("stats", "", "address of the HTTP/1.1 endpoint GET /counts (with -serve)")
	check := flag.String("check", "", "address of a gRPC server or balancer to check with -calls calls")
	calls := flag.Int("calls", 30, "calls made by -check")
	timeout := flag.Duration("timeout", 5*time.Second, "time allowed for all of -check's calls")
	writeReq := flag.String("write-request", "", "file to write one length-prefixed gRPC request to")
	size := flag.Int("size", 100, "payload bytes of the request and of the response asked for")
	flag.Parse()

	var err error
	switch {
	case *serve != "":
		err = runServers(strings.Split(*serve, ","), *stats)
	case *check != "":
		err = runCheck(*check, *calls, *size, *timeout)
	case *writeReq != "":
		err = writeRequest(*writeReq, *size)
	default:
		err = fmt.Errorf("give one of -serve, -check or -write-request (see -h)")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpcbackend:", err)
		os.Exit(1)
	}
}

// request is the message every call sends: a payload of size bytes, the
// same size asked for back, and the backend's port in the answer.
func request(size int) *testpb.SimpleRequest {
	return &testpb.SimpleRequest{
		ResponseSize: int32(size),
		Payload:      &testpb.Payload{Body: make([]byte, size)},
		FillServerId: true,
	}
}

// writeRequest writes request(size) as a gRPC message on the wire: a zero
// byte (not compressed), the length as 4 bytes big-endian, the protobuf.
func writeRequest(file string, size int) error {
	if size < 0 {
		return fmt.Errorf("-size must be 0 or more, not %d", size)
	}
	b, err := proto.Marshal(request(size))
	if err != nil {
		return err
	}
	frame := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(b)))
	return os.WriteFile(file, append(frame, b...), 0o644)
}

// backend serves UnaryCall on one address and counts the calls it served.
type backend struct {
	testpb.UnimplementedTestServiceServer
	addr  string
	id    string
	calls atomic.Int64
}

// UnaryCall answers with the payload size asked for; the body is zeros, as
// the interop servers send.
func (b *backend) UnaryCall(_ context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	b.calls.Add(1)
	out := &testpb.SimpleResponse{Payload: &testpb.Payload{Body: make([]byte, in.GetResponseSize())}}
	if in.GetFillServerId() {
		out.ServerId = b.id
	}
	return out, nil
}

func runServers(addrs []string, statsAddr string) error {
	var backends []*backend
	for _, a := range addrs {
		lis, err := net.Listen("tcp", a)
		if err != nil {
			return err
		}
		_, port, _ := net.SplitHostPort(a)
		b := &backend{addr: a, id: port}
		srv := grpc.NewServer()
		testpb.RegisterTestServiceServer(srv, b)
		go srv.Serve(lis)
		backends = append(backends, b)
	}
	counts := func() string {
		var sb strings.Builder
		for _, b := range backends {
			fmt.Fprintf(&sb, "%s %d\n", b.addr, b.calls.Load())
		}
		return sb.String()
	}
	if statsAddr != "" {
		lis, err := net.Listen("tcp", statsAddr)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /counts", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprint(w, counts())
		})
		go http.Serve(lis, mux)
	}
	fmt.Printf("serving grpc.testing.TestService/UnaryCall on %s\n", strings.Join(addrs, " "))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	fmt.Print(counts())
	return nil
}

func runCheck(addr string, calls, size int, timeout time.Duration) error {
	if calls < 1 {
		return fmt.Errorf("-calls must be at least 1, not %d", calls)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	client := testpb.NewTestServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	served := map[string]int{}
	req := request(size)
	for i := 0; i < calls; i++ {
		resp, err := client.UnaryCall(ctx, req)
		if err != nil {
			return fmt.Errorf("call %d of %d through %s: grpc-status %d (%s): %s",
				i+1, calls, addr, status.Code(err), status.Code(err), status.Convert(err).Message())
		}
		if n := len(resp.GetPayload().GetBody()); n != size {
			return fmt.Errorf("call %d of %d through %s: %d payload bytes, want %d", i+1, calls, addr, n, size)
		}
		served[resp.GetServerId()]++
	}
	ids := make([]string, 0, len(served))
	for id := range served {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s:%d", id, served[id])
	}
	fmt.Printf("%d calls ok (grpc-status 0), served by %s\n", calls, strings.Join(parts, " "))
	return nil
}
