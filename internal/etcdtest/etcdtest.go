// Package etcdtest runs a real etcd server inside a test, on loopback
// ports, so tests of discovery need nothing installed. It is imported by
// tests only.
package etcdtest

import (
	"context"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"relay/internal/testaddr"
)

// Server is one embedded etcd member. Stop and Start take it down and up
// again on the same ports and data, as an etcd restart would.
type Server struct {
	t        testing.TB
	dir      string
	client   url.URL
	peer     url.URL
	e        *embed.Etcd
	Endpoint string // http://127.0.0.1:PORT
}

// Start runs a one-member etcd cluster until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir(), client: freeURL(t), peer: freeURL(t)}
	s.Endpoint = s.client.String()
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start brings a stopped server up again.
func (s *Server) Start() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.client}
	cfg.AdvertiseClientUrls = []url.URL{s.client}
	cfg.ListenPeerUrls = []url.URL{s.peer}
	cfg.AdvertisePeerUrls = []url.URL{s.peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	// A test's etcd need not survive a power cut; without fsync a busy
	// machine's disk cannot stall a commit for seconds.
	cfg.UnsafeNoFsync = true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	var err error
	// The ports were free a moment ago; another test may have taken one
	// between, so a few attempts.
	for range 20 {
		if s.e, err = embed.StartEtcd(cfg); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatalf("etcd: %v", err)
	}
	select {
	case <-s.e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		s.e.Close()
		s.t.Fatal("etcd did not become ready within 30 s")
	}
}

// Stop takes the server down; a second Stop does nothing.
func (s *Server) Stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client() *clientv3.Client {
	s.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { cli.Close() })
	return cli
}

// Put writes key, failing the test on error.
func (s *Server) Put(cli *clientv3.Client, key, value string, opts ...clientv3.OpOption) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key, value, opts...); err != nil {
		s.t.Fatalf("etcd put %s: %v", key, err)
	}
}

// Delete removes key, failing the test on error.
func (s *Server) Delete(cli *clientv3.Client, key string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Delete(ctx, key); err != nil {
		s.t.Fatalf("etcd delete %s: %v", key, err)
	}
}

// freeURL is a loopback URL on a port nothing listens on, from below the
// ephemeral range (testaddr.FreePort), where no outgoing connection takes
// it while the server is stopped between Stop and Start.
func freeURL(t testing.TB) url.URL {
	return url.URL{Scheme: "http", Host: "127.0.0.1:" + testaddr.FreePort(t)}
}
