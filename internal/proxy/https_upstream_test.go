package proxy

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/testcert"
	"relay/internal/testlog"
	"relay/internal/tlsconf"
)

// tlsBackend is an https backend that counts full handshakes and resumed
// ones.
type tlsBackend struct {
	srv               *httptest.Server
	full, resumed     atomic.Int64
	clientCertSubject atomic.Value // string: the last client certificate's name
}

func newTLSBackend(t *testing.T, pair *testcert.Pair, requireClient *testcert.CA) *tlsBackend {
	tb := &tlsBackend{}
	tb.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS.DidResume {
			tb.resumed.Add(1)
		} else {
			tb.full.Add(1)
		}
		if len(r.TLS.PeerCertificates) > 0 {
			tb.clientCertSubject.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		w.Write([]byte("secure"))
	}))
	tb.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair.TLS}}
	if requireClient != nil {
		tb.srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		tb.srv.TLS.ClientCAs = requireClient.Pool
	}
	tb.srv.StartTLS()
	t.Cleanup(tb.srv.Close)
	return tb
}

// httpsBackend is relay's backend for tb under the name host (which the
// certificate must hold), with settings ut.
func httpsBackend(t *testing.T, tb *tlsBackend, ut config.UpstreamTLS) *backend.Backend {
	t.Helper()
	u, _ := url.Parse(tb.srv.URL)
	b, err := backend.New(u, 1)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := tlsconf.Client(u, ut)
	if err != nil {
		t.Fatal(err)
	}
	b.SetTLS(tc)
	return b
}

// An https backend is verified against the configured CA, reached over
// pooled connections, and resumes its TLS session on a new connection.
func TestHTTPSBackendVerifiedPooledAndResumed(t *testing.T) {
	ca := testcert.NewCA(t)
	tb := newTLSBackend(t, ca.Server(t, testcert.ECDSA, "127.0.0.1"), nil)
	b := httpsBackend(t, tb, config.UpstreamTLS{CAFile: ca.File})
	r := startRelayExactly(t, withDefaults(Config{}), b)
	cl := newClient(t, 1, "")
	for range 5 {
		if res := get(t, cl, r.url+"/"); res.status != 200 || res.body != "secure" {
			t.Fatalf("%d %q", res.status, res.body)
		}
	}
	if full, resumed := tb.full.Load(), tb.resumed.Load(); full != 5 || resumed != 0 {
		// One connection carries all five: every request sees the same
		// (full) handshake.
		t.Errorf("full %d, resumed %d; want 5 requests on one full handshake", full, resumed)
	}
	// Drop relay's idle connection: the next one resumes the session.
	r.p.core.CloseIdle()
	tb.srv.CloseClientConnections()
	if res := get(t, cl, r.url+"/"); res.status != 200 {
		t.Fatalf("after reconnecting: %d %q", res.status, res.body)
	}
	if tb.resumed.Load() != 1 {
		t.Errorf("the new connection did not resume the TLS session (full %d, resumed %d)", tb.full.Load(), tb.resumed.Load())
	}
}

// A backend whose certificate does not hold the name relay verifies gets
// no request: the client gets 502 and the log names the verification
// error. With tls_server_name set to the name the certificate holds, the
// same backend is reached.
func TestHTTPSBackendWithTheWrongNameIsRefused(t *testing.T) {
	ca := testcert.NewCA(t)
	tb := newTLSBackend(t, ca.Server(t, testcert.RSA, "api.internal"), nil)
	var logs testlog.Buffer
	cfg := withDefaults(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	cfg.Pool.Retries = 0
	r := startRelayExactly(t, cfg, httpsBackend(t, tb, config.UpstreamTLS{CAFile: ca.File}))
	if res := get(t, newClient(t, 1, ""), r.url+"/"); res.status != 502 {
		t.Errorf("status %d, want 502", res.status)
	}
	if tb.full.Load() != 0 {
		t.Error("the backend got a request over an unverified connection")
	}
	if !strings.Contains(logs.String(), "tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.1") {
		t.Errorf("the log does not name the verification error:\n%s", logs.String())
	}

	r2 := startRelayExactly(t, withDefaults(Config{}), httpsBackend(t, tb, config.UpstreamTLS{CAFile: ca.File, ServerName: "api.internal"}))
	if res := get(t, newClient(t, 1, ""), r2.url+"/"); res.status != 200 || res.body != "secure" {
		t.Errorf("with tls_server_name api.internal: %d %q", res.status, res.body)
	}
}

// A backend that requires a client certificate is reached with one
// (mutual TLS) and refuses relay without.
func TestHTTPSBackendMutualTLS(t *testing.T) {
	ca := testcert.NewCA(t)
	tb := newTLSBackend(t, ca.Server(t, testcert.ECDSA, "127.0.0.1"), ca)
	client := ca.Client(t, "relay-client")
	with := startRelayExactly(t, withDefaults(Config{}), httpsBackend(t, tb, config.UpstreamTLS{
		CAFile: ca.File, ClientCertFile: client.CertFile, ClientKeyFile: client.KeyFile}))
	if res := get(t, newClient(t, 1, ""), with.url+"/"); res.status != 200 || res.body != "secure" {
		t.Fatalf("with a client certificate: %d %q", res.status, res.body)
	}
	if got, _ := tb.clientCertSubject.Load().(string); got != "relay-client" {
		t.Errorf("the backend saw client certificate %q", got)
	}
	cfg := withDefaults(Config{})
	cfg.Pool.Retries = 0
	without := startRelayExactly(t, cfg, httpsBackend(t, tb, config.UpstreamTLS{CAFile: ca.File}))
	if res := get(t, newClient(t, 1, ""), without.url+"/"); res.status != 502 {
		t.Errorf("without a client certificate: %d, want 502", res.status)
	}
}
