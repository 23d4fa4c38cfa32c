// Package grpctest runs real gRPC servers for tests: gRPC's own test
// service (grpc.testing.TestService) and health service, on loopback
// ports, over h2c or TLS, each counting the calls it took.
package grpctest

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Server is one gRPC server on a loopback port.
type Server struct {
	// Addr is host:port; URL is http://Addr, or https://Addr over TLS.
	Addr, URL string
	// Calls counts the calls the server took, of every method.
	Calls atomic.Int64
	// Health is the server's health service, to set statuses on.
	Health *health.Server
	// Cancelled counts the calls whose context ended before the
	// handler returned (the client, or relay, cancelled them).
	Cancelled atomic.Int64
	// Active counts the calls whose handler is running.
	Active atomic.Int64
	// Fail, when not 0, is the status code every unary call ends with.
	Fail atomic.Int32

	srv *grpc.Server
	ln  net.Listener
	mu  sync.Mutex
	raw []net.Conn // the accepted connections, to cut them
}

// Start starts a server over h2c; Stop is registered for cleanup.
func Start(t testing.TB) *Server { return start(t, nil) }

// StartTLS starts a server over TLS with cert; clients must offer h2 by
// ALPN.
func StartTLS(t testing.TB, cert tls.Certificate) *Server {
	return start(t, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
}

func start(t testing.TB, tc *tls.Config) *Server {
	t.Helper()
	var opts []grpc.ServerOption
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	s, ln := newServer(t, opts...)
	if tc != nil {
		s.URL = "https://" + s.Addr
	}
	s.ln = &trackingListener{Listener: ln, s: s}
	go s.srv.Serve(s.ln)
	t.Cleanup(s.Stop)
	return s
}

// newServer listens on a loopback port and makes the gRPC server with
// the test and health services, not yet serving.
func newServer(t testing.TB, opts ...grpc.ServerOption) (*Server, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String(), Health: health.NewServer()}
	s.URL = "http://" + s.Addr
	s.srv = grpc.NewServer(opts...)
	testgrpc.RegisterTestServiceServer(s.srv, &service{s: s})
	healthpb.RegisterHealthServer(s.srv, s.Health)
	return s, ln
}

// Stop stops the server at once, cutting its connections.
func (s *Server) Stop() { s.srv.Stop() }

// GracefulStop sends GOAWAY on every connection and waits for the calls
// in progress to end.
func (s *Server) GracefulStop() { s.srv.GracefulStop() }

// Cut closes every connection the server accepted, as a crash would,
// without GOAWAY; the listener stays.
func (s *Server) Cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.raw {
		c.Close()
	}
	s.raw = nil
}

type trackingListener struct {
	net.Listener
	s *Server
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.s.mu.Lock()
		l.s.raw = append(l.s.raw, c)
		l.s.mu.Unlock()
	}
	return c, err
}

// Metadata keys the test service reads from a call.
const (
	// SleepKey delays the response by the duration its value names.
	SleepKey = "x-sleep"
	// BackendKey is the header and trailer the service names itself in.
	BackendKey = "x-backend"
)

type service struct {
	testgrpc.UnimplementedTestServiceServer
	s *Server
}

// begin counts a call, sends its header and sleeps as asked; the
// returned function counts its cancellation.
func (v *service) begin(ctx context.Context) func() {
	v.s.Calls.Add(1)
	v.s.Active.Add(1)
	md, _ := metadata.FromIncomingContext(ctx)
	grpc.SetTrailer(ctx, metadata.Pairs(BackendKey+"-trailer", v.s.Addr))
	if vs := md.Get(SleepKey); len(vs) > 0 {
		if d, err := time.ParseDuration(vs[0]); err == nil {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
	}
	return func() {
		v.s.Active.Add(-1)
		if ctx.Err() != nil {
			v.s.Cancelled.Add(1)
		}
	}
}

func (v *service) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	defer v.begin(ctx)()
	grpc.SetHeader(ctx, metadata.Pairs(BackendKey, v.s.Addr))
	return &testgrpc.Empty{}, nil
}

// UnaryCall answers with a payload of the size asked, or the status
// asked; it echoes the request's x-echo metadata as a header.
func (v *service) UnaryCall(ctx context.Context, req *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	defer v.begin(ctx)()
	md, _ := metadata.FromIncomingContext(ctx)
	hd := metadata.Pairs(BackendKey, v.s.Addr)
	for _, e := range md.Get("x-echo") {
		hd.Append("x-echo", e)
	}
	grpc.SetHeader(ctx, hd)
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if code := v.s.Fail.Load(); code != 0 {
		return nil, status.Error(codes.Code(code), "failing as the test asked")
	}
	if st := req.GetResponseStatus(); st != nil && st.Code != 0 {
		return nil, status.Error(codes.Code(st.Code), st.Message)
	}
	return &testgrpc.SimpleResponse{Payload: &testgrpc.Payload{Body: make([]byte, req.GetResponseSize())}}, nil
}

// StreamingOutputCall sends a message of each size asked, after each
// one's interval.
func (v *service) StreamingOutputCall(req *testgrpc.StreamingOutputCallRequest, st grpc.ServerStreamingServer[testgrpc.StreamingOutputCallResponse]) error {
	defer v.begin(st.Context())()
	st.SetHeader(metadata.Pairs(BackendKey, v.s.Addr))
	for _, p := range req.GetResponseParameters() {
		if p.IntervalUs > 0 {
			select {
			case <-time.After(time.Duration(p.IntervalUs) * time.Microsecond):
			case <-st.Context().Done():
				return st.Context().Err()
			}
		}
		if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, p.Size)}}); err != nil {
			return err
		}
	}
	if s := req.GetResponseStatus(); s != nil && s.Code != 0 {
		return status.Error(codes.Code(s.Code), s.Message)
	}
	return nil
}

// StreamingInputCall answers with the total size of the messages it got.
func (v *service) StreamingInputCall(st grpc.ClientStreamingServer[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse]) error {
	defer v.begin(st.Context())()
	total := 0
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return st.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
		}
		if err != nil {
			return err
		}
		total += len(m.GetPayload().GetBody())
	}
}

// FullDuplexCall answers each message at once with a message of each
// size it asks for.
func (v *service) FullDuplexCall(st grpc.BidiStreamingServer[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]) error {
	defer v.begin(st.Context())()
	st.SetHeader(metadata.Pairs(BackendKey, v.s.Addr))
	for {
		m, err := st.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		for _, p := range m.GetResponseParameters() {
			if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, p.Size)}}); err != nil {
				return err
			}
		}
	}
}

// Dial connects a client to addr over h2c, or over TLS with tc when it
// is not nil; Close is registered for cleanup.
func Dial(t testing.TB, addr string, tc *tls.Config) (*grpc.ClientConn, testgrpc.TestServiceClient) {
	t.Helper()
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc, testgrpc.NewTestServiceClient(cc)
}
