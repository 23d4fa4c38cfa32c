package discovery

import (
	"crypto/tls"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"relay/internal/config"
)

// KeepAliveTime is how often an etcd connection is pinged when it is
// quiet (gRPC's shortest), and KeepAliveTimeout how long an answer may
// take.
const (
	KeepAliveTime    = 10 * time.Second
	KeepAliveTimeout = 10 * time.Second
)

// NewClient returns an etcd client for e's cluster. It does not wait for
// the cluster: requests do, each within its own deadline. (With a
// username it asks for a token at once, and fails when no endpoint
// answers within the dial timeout.)
func NewClient(e *config.Etcd) (*clientv3.Client, error) {
	tc, err := clientTLS(e)
	if err != nil {
		return nil, err
	}
	return clientv3.New(clientv3.Config{
		Endpoints:   e.Endpoints,
		DialTimeout: e.DialTimeout,
		Username:    e.Username,
		Password:    e.Password,
		TLS:         tc,
		// relay logs what matters about etcd itself; the client's own
		// log would be a second format on standard error.
		Logger: zap.NewNop(),
		// A peer that vanished without a word (a dead host, dropped
		// packets) is found by gRPC pings within KeepAliveTime plus
		// KeepAliveTimeout, and the watch fails over. etcd refuses pings
		// more often than every 5 s; the timeout also bounds how long
		// sent data may go unacknowledged (TCP_USER_TIMEOUT), so it is
		// not shorter than a few retransmissions.
		DialKeepAliveTime:    KeepAliveTime,
		DialKeepAliveTimeout: max(e.DialTimeout, KeepAliveTimeout),
		// gRPC's own reconnect backoff grows to two minutes; relay wants
		// a returning etcd found within MaxBackoff, as its lists are.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: MinBackoff, Multiplier: 1.6, Jitter: 0.2, MaxDelay: MaxBackoff},
			MinConnectTimeout: e.DialTimeout,
		})},
	})
}

// clientTLS is how relay speaks TLS to e's endpoints, or nil when they are
// http.
func clientTLS(e *config.Etcd) (*tls.Config, error) {
	if !e.UsesTLS() {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         e.TLS.ServerName,
		InsecureSkipVerify: e.TLS.InsecureSkipVerify,
	}
	if e.TLS.CAFile != "" {
		pool, err := config.LoadCAFile(e.TLS.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if e.TLS.ClientCertFile != "" {
		pair, err := config.LoadCertificate(config.Certificate{CertFile: e.TLS.ClientCertFile, KeyFile: e.TLS.ClientKeyFile})
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// Endpoints splits a comma-separated list of endpoints, as flags give
// them (cmd/server's -register), dropping blanks around and between them.
func Endpoints(list string) []string {
	var eps []string
	for _, ep := range strings.Split(list, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			eps = append(eps, ep)
		}
	}
	return eps
}
