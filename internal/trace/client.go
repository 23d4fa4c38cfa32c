package trace

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// client sends one export request and says how many spans the collector
// took. A partial success (some spans rejected) is no error: rejected says
// how many, msg why.
type client interface {
	send(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (rejected int64, msg string, err error)
	close()
}

// userAgent names relay to the collector.
const userAgent = "relay-otlp"

// reconnectBackoff is how gRPC waits between attempts to reach a
// collector that is down. gRPC's own default grows to two minutes; spans
// are dropped all that while, so relay tries again within 5 s.
var reconnectBackoff = backoff.Config{
	BaseDelay:  250 * time.Millisecond,
	Multiplier: 1.6,
	Jitter:     0.2,
	MaxDelay:   5 * time.Second,
}

// newClient makes the client for c's protocol. It connects lazily: a
// collector down at start is not an error, only dropped spans.
func newClient(c *ExporterConfig) (client, error) {
	tlsConf, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	if c.Protocol == "http" {
		return newHTTPClient(c, tlsConf), nil
	}
	return newGRPCClient(c, tlsConf)
}

// tlsConfig is the TLS configuration for the collector, nil for plain text.
func (c *ExporterConfig) tlsConfig() (*tls.Config, error) {
	if c.Protocol == "http" {
		if u, err := url.Parse(c.Endpoint); err != nil || u.Scheme != "https" {
			return nil, nil
		}
	} else if c.Insecure {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tracing.exporter.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tracing.exporter.ca_file: %s holds no PEM certificate", c.CAFile)
		}
		conf.RootCAs = pool
	}
	return conf, nil
}

// grpcClient is OTLP/gRPC: one ClientConn, which reconnects by itself.
type grpcClient struct {
	conn *grpc.ClientConn
	svc  coltracepb.TraceServiceClient
	md   metadata.MD
}

func newGRPCClient(c *ExporterConfig, tlsConf *tls.Config) (*grpcClient, error) {
	creds := insecure.NewCredentials()
	if tlsConf != nil {
		creds = credentials.NewTLS(tlsConf)
	}
	conn, err := grpc.NewClient(c.Endpoint,
		grpc.WithTransportCredentials(creds),
		grpc.WithUserAgent(userAgent),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: 5 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("tracing.exporter.endpoint: %w", err)
	}
	md := metadata.MD{}
	for k, v := range c.Headers {
		md.Set(k, v) // lowered, as gRPC metadata keys are
	}
	return &grpcClient{conn: conn, svc: coltracepb.NewTraceServiceClient(conn), md: md}, nil
}

func (g *grpcClient) send(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (int64, string, error) {
	if len(g.md) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, g.md)
	}
	resp, err := g.svc.Export(ctx, req)
	if err != nil {
		return 0, "", err
	}
	ps := resp.GetPartialSuccess()
	return ps.GetRejectedSpans(), ps.GetErrorMessage(), nil
}

func (g *grpcClient) close() { g.conn.Close() }

// httpClient is OTLP/HTTP with protobuf bodies.
type httpClient struct {
	url       string
	headers   http.Header
	transport *http.Transport
	client    *http.Client
	body      []byte // the last request's body, reused once the transport is done with it
}

// maxResponse is the most of a collector's answer relay reads.
const maxResponse = 64 << 10

func newHTTPClient(c *ExporterConfig, tlsConf *tls.Config) *httpClient {
	tr := &http.Transport{
		Proxy:               nil, // a collector is reached directly, whatever HTTPS_PROXY says
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tlsConf,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   tlsConf != nil,
	}
	h := http.Header{}
	for k, v := range c.Headers {
		h.Set(k, v)
	}
	h.Set("Content-Type", "application/x-protobuf")
	h.Set("User-Agent", userAgent)
	return &httpClient{
		url:       c.tracesURL(),
		headers:   h,
		transport: tr,
		client: &http.Client{
			Transport: tr,
			// A redirect would resend spans somewhere the operator did
			// not name.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// sentBody is a request body that says when the transport is done with it:
// a response may come before the body is all written, and the buffer is
// reused only once it is.
type sentBody struct {
	*bytes.Reader
	closed chan struct{}
}

func (b *sentBody) Close() error {
	select {
	case <-b.closed:
	default:
		close(b.closed)
	}
	return nil
}

func (h *httpClient) send(ctx context.Context, req *coltracepb.ExportTraceServiceRequest) (int64, string, error) {
	body, err := proto.MarshalOptions{}.MarshalAppend(h.body[:0], req)
	if err != nil {
		return 0, "", fmt.Errorf("encoding spans: %w", err)
	}
	sb := &sentBody{Reader: bytes.NewReader(body), closed: make(chan struct{})}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, sb)
	if err != nil {
		return 0, "", err
	}
	hr.ContentLength = int64(len(body))
	hr.Header = h.headers.Clone()
	resp, err := h.client.Do(hr)
	if err == nil {
		defer resp.Body.Close()
	}
	select {
	case <-sb.closed:
		h.body = body
	default:
		h.body = nil // still being written: the next request gets a new one
	}
	if err != nil {
		return 0, "", err
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode/100 != 2 {
		return 0, "", fmt.Errorf("collector answered %s%s", resp.Status, statusDetail(resp, answer))
	}
	var out coltracepb.ExportTraceServiceResponse
	if isProtobuf(resp.Header.Get("Content-Type")) && len(answer) > 0 {
		if err := proto.Unmarshal(answer, &out); err != nil {
			return 0, "", fmt.Errorf("reading the collector's answer: %w", err)
		}
	}
	ps := out.GetPartialSuccess()
	return ps.GetRejectedSpans(), ps.GetErrorMessage(), nil
}

func (h *httpClient) close() { h.transport.CloseIdleConnections() }

func isProtobuf(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/x-protobuf"
}

// statusDetail is what a collector said with a failure: the message of an
// OTLP Status body, or the start of a text one.
func statusDetail(resp *http.Response, body []byte) string {
	if len(body) == 0 {
		return ""
	}
	if isProtobuf(resp.Header.Get("Content-Type")) {
		var st statuspb.Status
		if proto.Unmarshal(body, &st) != nil || st.Message == "" {
			return ""
		}
		return ": " + st.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200]
	}
	return ": " + s
}
