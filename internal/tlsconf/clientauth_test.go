package tlsconf

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/testcert"
)

// mtlsServer serves s's configuration on 127.0.0.1: each connection's
// handshake, then a line saying whether it resumed and how many verified
// chains Verified gives, then the end.
func mtlsServer(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				tc := tls.Server(c, s.Config())
				if tc.Handshake() != nil {
					return
				}
				cs := tc.ConnectionState()
				fmt.Fprintf(tc, "resumed=%v verified=%d\n", cs.DidResume, len(s.Verified(&cs)))
			}()
		}
	}()
	return ln.Addr().String()
}

// hello dials addr asking for sni with cert (nil: none) and returns the
// server's line, or the error of a refused handshake.
func hello(t *testing.T, addr, sni string, roots *testcert.CA, cert *testcert.Pair, cache tls.ClientSessionCache) (string, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: sni, RootCAs: roots.Pool, ClientSessionCache: cache,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert == nil {
				return &tls.Certificate{}, nil
			}
			return &cert.TLS, nil
		}})
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil && len(b) == 0 {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func newMTLSServer(t *testing.T, rules []config.ClientAuthRule) (*Server, *testcert.CA) {
	t.Helper()
	srvCA := testcert.NewCA(t)
	pair := srvCA.Server(t, testcert.ECDSA, "api.example.com", "www.example.com", "a.internal.example.com", "b.example.com")
	s, err := NewServer([]config.Certificate{{CertFile: pair.CertFile, KeyFile: pair.KeyFile}}, "1.2")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetClientAuth(rules, nil); err != nil {
		t.Fatal(err)
	}
	return s, srvCA
}

// The rule of a handshake is picked by its SNI name: exact, then a
// wildcard of one label, then the default; the certificates are the
// set's whatever the rule. An ACME TLS-ALPN-01 hello is never asked for a
// client certificate.
func TestClientRuleBySNI(t *testing.T) {
	ca := testcert.NewCA(t)
	s, _ := newMTLSServer(t, []config.ClientAuthRule{
		{Hosts: []string{"api.example.com"}, Mode: "require", CAFiles: []string{ca.File}},
		{Hosts: []string{"*.internal.example.com"}, Mode: "verify_if_given", CAFiles: []string{ca.File}},
		{Mode: "request"},
	})
	pick := s.Config().GetConfigForClient
	for _, tt := range []struct {
		name   string
		protos []string
		want   tls.ClientAuthType
	}{
		{"api.example.com", nil, tls.RequireAndVerifyClientCert},
		{"API.example.com", []string{"h2"}, tls.RequireAndVerifyClientCert},
		{"a.internal.example.com", nil, tls.VerifyClientCertIfGiven},
		{"b.a.internal.example.com", nil, tls.RequestClientCert},
		{"internal.example.com", nil, tls.RequestClientCert},
		{"", nil, tls.RequestClientCert},
		{"api.example.com", []string{"acme-tls/1"}, tls.NoClientCert},
	} {
		c, err := pick(&tls.ClientHelloInfo{ServerName: tt.name, SupportedProtos: tt.protos})
		if err != nil {
			t.Fatal(err)
		}
		if c.ClientAuth != tt.want {
			t.Errorf("%q %v: ClientAuth %v, want %v", tt.name, tt.protos, c.ClientAuth, tt.want)
		}
		if len(c.Certificates) != 1 || c.MinVersion != tls.VersionTLS12 {
			t.Errorf("%q: the rule's config lost the certificate set's settings", tt.name)
		}
	}
	// Rules whose files do not load leave the rules in use.
	err := s.SetClientAuth([]config.ClientAuthRule{{Mode: "require", CAFiles: []string{filepath.Join(t.TempDir(), "gone.pem")}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "client_auth[0]") || !strings.Contains(err.Error(), "gone.pem") {
		t.Errorf("SetClientAuth of a missing CA file: %v", err)
	}
	if c, _ := pick(&tls.ClientHelloInfo{ServerName: "api.example.com"}); c.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("after refused rules: %v", c.ClientAuth)
	}
	// No rules: the certificate set's config, asking for nothing.
	s.SetClientAuth(nil, nil)
	if c, _ := pick(&tls.ClientHelloInfo{ServerName: "api.example.com"}); c.ClientAuth != tls.NoClientCert {
		t.Errorf("without rules: %v", c.ClientAuth)
	}
}

// A CRL file replaced on disk is read again within crlCheckEvery,
// without a reload: a certificate it newly revokes fails. A replacement
// that does not load leaves the last lists in force.
func TestCRLReadAgainWhenItChanges(t *testing.T) {
	defer func(d time.Duration) { crlCheckEvery = d }(crlCheckEvery)
	crlCheckEvery = 20 * time.Millisecond
	ca := testcert.NewCA(t)
	good, other := ca.Client(t, "good"), ca.Client(t, "other")
	crl := ca.WriteCRL(t, filepath.Join(t.TempDir(), "clients.crl"), other.Cert)
	s, srvCA := newMTLSServer(t, []config.ClientAuthRule{{Mode: "require", CAFiles: []string{ca.File}, CRLFiles: []string{crl}}})
	addr := mtlsServer(t, s)
	if got, err := hello(t, addr, "api.example.com", srvCA, good, nil); err != nil || got != "resumed=false verified=1" {
		t.Fatalf("before: %q %v", got, err)
	}
	if _, err := hello(t, addr, "api.example.com", srvCA, other, nil); err == nil {
		t.Fatal("a revoked certificate was taken")
	}
	ca.WriteCRL(t, crl, other.Cert, good.Cert)
	refused := func(p *testcert.Pair) bool {
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := hello(t, addr, "api.example.com", srvCA, p, nil); err != nil {
				return true
			}
		}
		return false
	}
	if !refused(good) {
		t.Fatal("a certificate the replaced CRL revokes is still taken")
	}
	if err := os.WriteFile(crl, []byte("broken"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * crlCheckEvery)
	if _, err := hello(t, addr, "api.example.com", srvCA, good, nil); err == nil {
		t.Error("a CRL that no longer loads dropped the revocations in force")
	}
}

// lastSession is a client session cache that offers the last session it
// got whatever name is asked for, as a client trying a ticket of one name
// on another would.
type lastSession struct {
	mu sync.Mutex
	s  *tls.ClientSessionState
}

func (c *lastSession) Get(string) (*tls.ClientSessionState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s, c.s != nil
}

func (c *lastSession) Put(_ string, s *tls.ClientSessionState) {
	if s != nil {
		c.mu.Lock()
		c.s = s
		c.mu.Unlock()
	}
}

// A resumed session is verified again under the rule of its name: a
// session resumes under its own rule, but one whose certificate another
// rule's CAs verified does not carry that verification to a rule of
// other CAs. (crypto/tls now checks a resumed chain against the ClientCAs
// of the handshake's config too; verifyConnection verifies a resumed
// chain against the rule's CAs whatever crypto/tls does, and either
// refusal passes here.)
func TestResumptionIsVerifiedUnderItsRule(t *testing.T) {
	caA, caB := testcert.NewCA(t), testcert.NewCA(t)
	s, srvCA := newMTLSServer(t, []config.ClientAuthRule{
		{Hosts: []string{"api.example.com"}, Mode: "require", CAFiles: []string{caA.File}},
		{Hosts: []string{"b.example.com"}, Mode: "require", CAFiles: []string{caB.File}},
	})
	addr := mtlsServer(t, s)
	cache := &lastSession{}
	cert := caA.Client(t, "a")
	if got, err := hello(t, addr, "api.example.com", srvCA, cert, cache); err != nil || got != "resumed=false verified=1" {
		t.Fatalf("first: %q %v", got, err)
	}
	// TLS 1.3 tickets come after the handshake; the first read took them.
	if got, err := hello(t, addr, "api.example.com", srvCA, cert, cache); err != nil || got != "resumed=true verified=1" {
		t.Fatalf("resumed under its own rule: %q %v", got, err)
	}
	if got, err := hello(t, addr, "b.example.com", srvCA, cert, cache); err == nil {
		t.Fatalf("a session of api.example.com's CA at b.example.com: %q, want refused", got)
	}
}

// managedPair is a Managed holding one certificate and answering every
// TLS-ALPN-01 hello with another.
type managedPair struct{ cert, challenge *tls.Certificate }

func (m managedPair) Certificate(name string) *tls.Certificate {
	if name == "acme.example.net" {
		return m.cert
	}
	return nil
}

func (m managedPair) Default() *tls.Certificate { return m.cert }

func (m managedPair) ChallengeCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return m.challenge, nil
}

// A name relay orders itself gets its ordered certificate under its
// client certificate rule: the rule's configuration keeps the managed
// pick, and a CA's TLS-ALPN-01 hello for that name is answered with the
// challenge and asked for no certificate.
func TestClientRuleKeepsManagedCertificates(t *testing.T) {
	srvCA, clientCA := testcert.NewCA(t), testcert.NewCA(t)
	file := srvCA.Server(t, testcert.ECDSA, "www.example.com")
	ordered := srvCA.Server(t, testcert.ECDSA, "acme.example.net")
	challenge := srvCA.Server(t, testcert.ECDSA, "acme.example.net")
	s, err := NewManagedServer([]config.Certificate{{CertFile: file.CertFile, KeyFile: file.KeyFile}}, "1.2",
		managedPair{cert: &ordered.TLS, challenge: &challenge.TLS})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetClientAuth([]config.ClientAuthRule{{Hosts: []string{"acme.example.net"}, Mode: "require", CAFiles: []string{clientCA.File}}}, nil); err != nil {
		t.Fatal(err)
	}
	addr := mtlsServer(t, s)
	if _, err := hello(t, addr, "acme.example.net", srvCA, nil, nil); err == nil {
		t.Error("a handshake without a client certificate passed a require rule")
	}
	line, err := hello(t, addr, "acme.example.net", srvCA, clientCA.Client(t, "svc"), nil)
	if err != nil || line != "resumed=false verified=1" {
		t.Fatalf("with a client certificate: %q, %v", line, err)
	}
	// The certificate served is the ordered one, not the file's.
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "acme.example.net", RootCAs: srvCA.Pool,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &clientCA.Client(t, "svc").TLS, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	got := c.ConnectionState().PeerCertificates[0].SerialNumber
	c.Close()
	if got.Cmp(ordered.Cert.SerialNumber) != 0 {
		t.Errorf("served serial %v, want the ordered certificate's %v", got, ordered.Cert.SerialNumber)
	}
	cfg, err := s.Config().GetConfigForClient(&tls.ClientHelloInfo{ServerName: "acme.example.net", SupportedProtos: []string{"acme-tls/1"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientAuth != tls.NoClientCert || len(cfg.Certificates) != 1 || cfg.NextProtos[0] != "acme-tls/1" {
		t.Errorf("TLS-ALPN-01 hello: ClientAuth %v, %d certificates, protocols %v", cfg.ClientAuth, len(cfg.Certificates), cfg.NextProtos)
	}
}

// Without files, a handshake for a name relay holds nothing for, or with
// no name, gets the managed default; without a default it fails.
func TestManagedDefaultWithoutFiles(t *testing.T) {
	ca := testcert.NewCA(t)
	ordered := ca.Server(t, testcert.ECDSA, "acme.example.net")
	s, err := NewManagedServer(nil, "1.2", managedPair{cert: &ordered.TLS})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"acme.example.net", "other.example.net", ""} {
		c, err := s.Config().GetConfigForClient(&tls.ClientHelloInfo{ServerName: name})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.GetCertificate(&tls.ClientHelloInfo{ServerName: name})
		if err != nil || got != &ordered.TLS {
			t.Errorf("%q: %v, %v; want the ordered certificate", name, got, err)
		}
	}
	none, err := NewManagedServer(nil, "1.2", managedPair{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Config().GetConfigForClient(&tls.ClientHelloInfo{ServerName: "x.example.net"}); err != nil {
		t.Fatal(err)
	}
	c, _ := none.Config().GetConfigForClient(&tls.ClientHelloInfo{ServerName: "x.example.net"})
	if _, err := c.GetCertificate(&tls.ClientHelloInfo{ServerName: "x.example.net"}); err == nil || !strings.Contains(err.Error(), "x.example.net") {
		t.Errorf("no certificate at all: %v", err)
	}
}
