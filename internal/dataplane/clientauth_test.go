package dataplane

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/testcert"
	"relay/internal/tlsconf"
)

// Client certificates at relay's TLS edge, end to end: relay built as
// cmd/relay builds it (the data plane, the doors, tlsconf.Server with the
// file's client_auth), real TLS on 127.0.0.1, certificates made here, and
// a backend that answers with the fields and trailers it got.

// certSeen is what the certificate backend answers.
type certSeen struct {
	Headers  http.Header `json:"headers"`
	Trailers http.Header `json:"trailers"`
}

// mtls is a relay with a TLS listener under a client_auth section, its
// backend, and the CAs and certificates of a test.
type mtls struct {
	*testRelay
	addr  string // the TLS listener
	certs *tlsconf.Server
	srvCA *testcert.CA // signs relay's server certificate
	hits  atomic.Int64 // requests the backend took
	base  string       // what startMTLS put before the test's lines
}

// mtlsPKI is a test's certificates: the clients' CA, another CA, and
// client certificates good, from the wrong CA, expired and revoked (by the
// CRL at crl).
type mtlsPKI struct {
	ca, wrong                       *testcert.CA
	good, wrongCA, expired, revoked *testcert.Pair
	crl                             string
	dir                             string
}

func newPKI(t *testing.T) *mtlsPKI {
	p := &mtlsPKI{ca: testcert.NewCA(t), wrong: testcert.NewCA(t), dir: t.TempDir()}
	p.good = p.ca.ClientWith(t, "good", testcert.ClientOptions{Subject: pkix.Name{CommonName: "payments", Organization: []string{"Example"}},
		DNS: []string{"svc.example.com"}, URIs: []string{"spiffe://example.org/ns/prod/sa/payments"}})
	p.wrongCA = p.wrong.ClientWith(t, "wrong", testcert.ClientOptions{Subject: pkix.Name{CommonName: "payments", Organization: []string{"Example"}}})
	p.expired = p.ca.ClientWith(t, "expired", testcert.ClientOptions{NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour)})
	p.revoked = p.ca.ClientWith(t, "revoked", testcert.ClientOptions{})
	p.crl = p.ca.WriteCRL(t, filepath.Join(p.dir, "clients.crl"), p.revoked.Cert)
	return p
}

// startMTLS serves yml (which must hold client_auth, and may use $ca,
// $crl for the clients' CA and CRL) on a cleartext and a TLS listener;
// relay's certificate covers api.example.com, www.example.com and
// *.internal.example.com.
func startMTLS(t *testing.T, pki *mtlsPKI, yml string) *mtls {
	t.Helper()
	m := &mtls{srvCA: testcert.NewCA(t)}
	pair := m.srvCA.Server(t, testcert.ECDSA, "api.example.com", "www.example.com", "a.internal.example.com", "other.example.com")
	be := serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.hits.Add(1)
		io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Who", "certs")
		json.NewEncoder(w).Encode(certSeen{Headers: r.Header, Trailers: r.Trailer})
	}))
	yml = strings.NewReplacer("$ca", pki.ca.File, "$crl", pki.crl, "$be", be).Replace(yml)
	m.base = fmt.Sprintf("tls_listen: 127.0.0.1:0\ntls_certificates:\n  - cert_file: %s\n    key_file: %s\nbackends: [%s]\n", pair.CertFile, pair.KeyFile, be)
	full := m.base + yml
	m.testRelay = startRelay(t, full, Options{})
	cfg := parse(t, "h2c: true\n"+full)
	var err error
	if m.certs, err = tlsconf.NewServer(cfg.TLSCertificates, cfg.TLSMinVersion); err != nil {
		t.Fatal(err)
	}
	if err := m.certs.SetClientAuth(cfg.ClientAuth, nil); err != nil {
		t.Fatal(err)
	}
	m.plane.Core().SetClientVerifier(m.certs.Verified)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go m.proxy.ServeTLS(ln, m.certs.Config())
	m.addr = ln.Addr().String()
	return m
}

// reload applies yml (as startMTLS takes it) as cmd/relay applies a
// reload in a serving process: the data plane, then the listener's
// certificates and rules.
func (m *mtls) reload(t *testing.T, pki *mtlsPKI, yml string) {
	t.Helper()
	yml = strings.NewReplacer("$ca", pki.ca.File, "$crl", pki.crl).Replace(yml)
	cfg := parse(t, "h2c: true\n"+m.base+yml)
	if err := m.plane.Reconfigure(cfg); err != nil {
		t.Fatal(err)
	}
	if err := m.certs.Reload(cfg.TLSCertificates, cfg.TLSMinVersion); err != nil {
		t.Fatal(err)
	}
	if err := m.certs.SetClientAuth(cfg.ClientAuth, nil); err != nil {
		t.Fatal(err)
	}
}

// dial opens a TLS connection asking for sni ("" sends none) and proto
// by ALPN, presenting cert (nil: none) whatever relay asks for. The
// handshake's error is returned, not fatal: with TLS 1.3 a refused
// certificate shows at the first read.
func (m *mtls) dial(t *testing.T, sni, proto string, cert *testcert.Pair) (*tls.Conn, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: m.srvCA.Pool, ServerName: sni, NextProtos: []string{proto},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert == nil {
				return &tls.Certificate{}, nil
			}
			return &cert.TLS, nil
		}}
	if sni == "" {
		// No SNI: verify relay's certificate by hand, for api.example.com.
		cfg.InsecureSkipVerify = true
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			c, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			_, err = c.Verify(x509.VerifyOptions{Roots: m.srvCA.Pool, DNSName: "api.example.com"})
			return err
		}
	}
	tc := tls.Client(dialTCP(t, m.addr), cfg)
	if err := tc.Handshake(); err != nil {
		tc.Close()
		return nil, err
	}
	return tc, nil
}

// get sends GET / for host over HTTP/1.1 on a new connection with SNI sni
// and cert, and returns relay's answer and what the backend saw; err is
// the TLS or read error of a refused connection.
func (m *mtls) get(t *testing.T, sni, host string, cert *testcert.Pair, fields ...[2]string) (int, *certSeen, error) {
	t.Helper()
	tc, err := m.dial(t, sni, "http/1.1", cert)
	if err != nil {
		return 0, nil, err
	}
	defer tc.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", host)
	for _, f := range fields {
		fmt.Fprintf(&b, "%s: %s\r\n", f[0], f[1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(tc, b.String()); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, seenOf(resp.Header, body), nil
}

func seenOf(h http.Header, body []byte) *certSeen {
	if h.Get("X-Who") != "certs" {
		return nil
	}
	var s certSeen
	if json.Unmarshal(body, &s) != nil {
		return nil
	}
	return &s
}

// xfcc is the X-Forwarded-Client-Cert the backend saw; "" for none.
func (s *certSeen) xfcc() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.Headers.Values("X-Forwarded-Client-Cert"), "|")
}

// Every mode, with every kind of certificate: the handshakes refused, and
// for those taken what the backend heard of the certificate.
func TestClientAuthModes(t *testing.T) {
	pki := newPKI(t)
	type result int
	const (
		refused result = iota
		anonymous
		passed
	)
	certs := []struct {
		name  string
		pair  *testcert.Pair
		alert string // the TLS alert of a refusal
	}{{"no certificate", nil, "certificate required"}, {"wrong CA", pki.wrongCA, "unknown certificate authority"},
		{"expired", pki.expired, "expired certificate"}, {"revoked", pki.revoked, "bad certificate"}, {"good", pki.good, ""}}
	for _, tt := range []struct {
		mode string
		want []result // by certs
	}{
		{"none", []result{anonymous, anonymous, anonymous, anonymous, anonymous}},
		{"request", []result{anonymous, anonymous, anonymous, anonymous, passed}},
		{"require", []result{refused, refused, refused, refused, passed}},
		{"verify_if_given", []result{anonymous, refused, refused, refused, passed}},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			files := "    ca_files: [$ca]\n    crl_files: [$crl]\n"
			if tt.mode == "none" {
				files = ""
			}
			m := startMTLS(t, pki, "client_cert_headers: xfcc\nclient_auth:\n  - mode: "+tt.mode+"\n"+files)
			for i, c := range certs {
				before := m.hits.Load()
				status, seen, err := m.get(t, "api.example.com", "api.example.com", c.pair)
				switch want := tt.want[i]; {
				case want == refused:
					if err == nil {
						t.Errorf("%s: answered %d, want the handshake refused", c.name, status)
					} else if !strings.Contains(err.Error(), "remote error: tls: "+c.alert) {
						t.Errorf("%s: %v, want the alert %q", c.name, err, c.alert)
					}
					if m.hits.Load() != before {
						t.Errorf("%s: the backend got a request", c.name)
					}
				case err != nil || status != 200 || seen == nil:
					t.Errorf("%s: %d %v, want 200 from the backend", c.name, status, err)
				case want == anonymous && seen.xfcc() != "":
					t.Errorf("%s: the backend was told %q", c.name, seen.xfcc())
				case want == passed && !strings.Contains(seen.xfcc(), `Subject="CN=payments,O=Example"`):
					t.Errorf("%s: X-Forwarded-Client-Cert %q", c.name, seen.xfcc())
				}
			}
		})
	}
}

// Mode request without ca_files asks for a certificate and never
// verifies it, so nothing of it reaches the backend.
func TestClientAuthRequestWithoutCAs(t *testing.T) {
	pki := newPKI(t)
	m := startMTLS(t, pki, "client_cert_headers: fields\nclient_auth:\n  - mode: request\n")
	status, seen, err := m.get(t, "api.example.com", "api.example.com", pki.good)
	if err != nil || status != 200 || seen == nil {
		t.Fatalf("%d %v", status, err)
	}
	if v := seen.Headers.Values("X-Client-Cert-Subject"); len(v) != 0 {
		t.Errorf("an unverified certificate reached the backend: %q", v)
	}
}

// allow: a certificate matching one entry (a subject, a DNS SAN, a URI
// SAN under a prefix) is taken, one matching none is refused.
func TestClientAuthAllowList(t *testing.T) {
	pki := newPKI(t)
	m := startMTLS(t, pki, `client_cert_headers: fields
client_auth:
  - mode: require
    ca_files: [$ca]
    allow:
      subjects: ["CN=payments,O=Example"]
      dns: [svc.example.com]
      uri: ["spiffe://example.org/ns/prod/*"]
`)
	for _, tt := range []struct {
		name string
		o    testcert.ClientOptions
		ok   bool
	}{
		{"subject", testcert.ClientOptions{Subject: pkix.Name{CommonName: "payments", Organization: []string{"Example"}}}, true},
		{"DNS SAN", testcert.ClientOptions{DNS: []string{"other.example.com", "SVC.example.com"}}, true},
		{"URI under the prefix", testcert.ClientOptions{URIs: []string{"spiffe://example.org/ns/prod/sa/billing"}}, true},
		{"none of them", testcert.ClientOptions{Subject: pkix.Name{CommonName: "payments", Organization: []string{"Other"}},
			DNS: []string{"svc.example.org"}, URIs: []string{"spiffe://example.org/ns/dev/sa/billing", "spiffe://example.org/ns/prod"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cert := pki.ca.ClientWith(t, "allow", tt.o)
			status, seen, err := m.get(t, "api.example.com", "api.example.com", cert)
			if !tt.ok {
				if err == nil {
					t.Errorf("answered %d, want the handshake refused", status)
				}
				return
			}
			if err != nil || status != 200 || seen == nil {
				t.Fatalf("%d %v", status, err)
			}
			if got := seen.Headers.Get("X-Client-Cert-Subject"); got != cert.Cert.Subject.String() {
				t.Errorf("X-Client-Cert-Subject %q, want %q", got, cert.Cert.Subject)
			}
		})
	}
}

// misdirectYAML asks clients of api.example.com and the internal names
// for a certificate and others for none.
const misdirectYAML = `client_auth:
  - hosts: [api.example.com, "*.internal.example.com"]
    mode: require
    ca_files: [$ca]
  - mode: none
`

// A request whose Host falls under another rule than its connection's
// SNI name is answered 421 and never reaches the backend, over HTTP/1.1;
// without SNI the connection has the default rule. Hosts of one rule
// share connections as before.
func TestClientAuthMisdirectedHTTP1(t *testing.T) {
	pki := newPKI(t)
	m := startMTLS(t, pki, misdirectYAML)
	for _, tt := range []struct {
		name, sni, host string
		cert            *testcert.Pair
		want            int
	}{
		{"asked for none, sent to a host that requires one", "www.example.com", "api.example.com", nil, 421},
		{"a wildcard host from a name asking for none", "www.example.com", "a.internal.example.com", nil, 421},
		{"verified, sent to a host of the default rule", "api.example.com", "www.example.com", pki.good, 421},
		{"no SNI, sent to a host that requires one", "", "api.example.com:443", nil, 421},
		{"no SNI, a host of the default rule", "", "other.example.com", nil, 200},
		{"two names of the default rule", "www.example.com", "other.example.com", nil, 200},
		{"two names of one rule", "api.example.com", "A.INTERNAL.example.com", pki.good, 200},
		{"the same name", "api.example.com", "api.example.com:443", pki.good, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := m.hits.Load()
			status, _, err := m.get(t, tt.sni, tt.host, tt.cert)
			if err != nil || status != tt.want {
				t.Fatalf("SNI %q, Host %q: %d %v, want %d", tt.sni, tt.host, status, err, tt.want)
			}
			if tt.want == 421 && m.hits.Load() != before {
				t.Error("the backend got the misdirected request")
			}
		})
	}
	// The cleartext listener has no SNI to hold a Host to.
	if r := sendH1(t, m.testRelay.addr, rawReq{target: "/", host: "api.example.com"}); r.status != 200 {
		t.Errorf("cleartext: %v", &r)
	}
}

// h2conn is a raw HTTP/2 client connection that sends requests on
// streams of its choosing and reads their answers.
type h2conn struct {
	nc   net.Conn
	fr   *http2.Framer
	next uint32
}

func newH2Conn(t *testing.T, nc net.Conn) *h2conn {
	t.Helper()
	nc.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return &h2conn{nc: nc, fr: fr, next: 1}
}

// get sends GET / for authority with fields on the next stream and
// returns the answer's status and what the backend saw.
func (c *h2conn) get(t *testing.T, authority string, fields ...[2]string) (int, *certSeen) {
	t.Helper()
	id := c.next
	c.next += 2
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":path", "/"}, {":authority", authority}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, f := range fields {
		enc.WriteField(hpack.HeaderField{Name: strings.ToLower(f[0]), Value: f[1]})
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	status, h, body := 0, http.Header{}, []byte(nil)
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			t.Fatalf("stream %d: %v", id, err)
		}
		end := false
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = c.fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID != id {
				break
			}
			for _, hf := range f.Fields {
				if hf.Name == ":status" {
					fmt.Sscan(hf.Value, &status)
				} else {
					h.Add(hf.Name, hf.Value)
				}
			}
			end = f.StreamEnded()
		case *http2.DataFrame:
			if f.StreamID == id {
				body = append(body, f.Data()...)
				end = f.StreamEnded()
			}
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				t.Fatalf("stream %d reset: %v", id, f.ErrCode)
			}
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v", f.ErrCode)
		}
		if err != nil {
			t.Fatal(err)
		}
		if end {
			return status, seenOf(h, body)
		}
	}
}

// The same over HTTP/2, where one connection may carry requests for
// several names (coalescing): each stream's :authority is held to the
// connection's rule, and 421 leaves the connection serving.
func TestClientAuthMisdirectedHTTP2(t *testing.T) {
	pki := newPKI(t)
	m := startMTLS(t, pki, misdirectYAML)
	nc, err := m.dial(t, "api.example.com", "h2", pki.good)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := newH2Conn(t, nc)
	if status, seen := c.get(t, "api.example.com"); status != 200 || !strings.Contains(seen.xfcc(), "CN=payments") {
		t.Fatalf("first stream: %d %q", status, seen.xfcc())
	}
	before := m.hits.Load()
	if status, seen := c.get(t, "www.example.com"); status != 421 || seen != nil {
		t.Errorf("a second :authority of another rule: %d, want 421", status)
	}
	if m.hits.Load() != before {
		t.Error("the backend got the misdirected stream")
	}
	if status, _ := c.get(t, "a.internal.example.com"); status != 200 {
		t.Errorf("a second :authority of the same rule: %d, want 200", status)
	}

	nc2, err := m.dial(t, "www.example.com", "h2", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	c2 := newH2Conn(t, nc2)
	if status, _ := c2.get(t, "other.example.com"); status != 200 {
		t.Errorf("another name of the default rule: %d", status)
	}
	if status, _ := c2.get(t, "api.example.com"); status != 421 {
		t.Errorf("a connection that gave no certificate, to api.example.com: %d, want 421", status)
	}
}

// A client's own X-Forwarded-Client-Cert and X-Client-Cert-Subject,
// in the head or in the trailers, over HTTP/1.1 or HTTP/2, with a
// certificate or without, never reach the backend: it hears relay's word
// alone.
func TestClientAuthSpoofedFieldsNeverReachBackends(t *testing.T) {
	pki := newPKI(t)
	m := startMTLS(t, pki, "client_cert_headers: fields\nclient_auth:\n  - mode: verify_if_given\n    ca_files: [$ca]\n")
	forged := [][2]string{{"X-Forwarded-Client-Cert", "Hash=00;Subject=\"CN=admin\""}, {"X-Client-Cert-Subject", "CN=admin"}, {"x-client-cert-fingerprint", "00"}}
	check := func(t *testing.T, what string, seen *certSeen, cert *testcert.Pair) {
		t.Helper()
		if seen == nil {
			t.Fatalf("%s: relay answered itself", what)
		}
		for _, h := range []http.Header{seen.Headers, seen.Trailers} {
			if v := h.Values("X-Forwarded-Client-Cert"); len(v) != 0 {
				t.Errorf("%s: the backend got X-Forwarded-Client-Cert %q", what, v)
			}
		}
		if v := seen.Trailers.Values("X-Client-Cert-Subject"); len(v) != 0 {
			t.Errorf("%s: the backend got X-Client-Cert-Subject %q in the trailers", what, v)
		}
		want := []string(nil)
		if cert != nil {
			want = []string{cert.Cert.Subject.String()}
		}
		if got := seen.Headers.Values("X-Client-Cert-Subject"); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: X-Client-Cert-Subject %q, want %q", what, got, want)
		}
		if got := seen.Headers.Values("X-Client-Cert-Fingerprint"); cert == nil && len(got) != 0 {
			t.Errorf("%s: X-Client-Cert-Fingerprint %q", what, got)
		}
	}
	for _, cert := range []*testcert.Pair{nil, pki.good} {
		name := map[bool]string{true: "without a certificate", false: "with a certificate"}[cert == nil]
		t.Run(name, func(t *testing.T) {
			// HTTP/1.1, head.
			status, seen, err := m.get(t, "api.example.com", "api.example.com", cert, forged...)
			if err != nil || status != 200 {
				t.Fatalf("%d %v", status, err)
			}
			check(t, "HTTP/1.1 head", seen, cert)

			// HTTP/1.1, trailers of a chunked body.
			tc, err := m.dial(t, "api.example.com", "http/1.1", cert)
			if err != nil {
				t.Fatal(err)
			}
			defer tc.Close()
			io.WriteString(tc, "POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\nTrailer: X-Forwarded-Client-Cert, X-Client-Cert-Subject\r\n\r\n"+
				"1\r\nx\r\n0\r\nX-Forwarded-Client-Cert: Hash=00\r\nX-Client-Cert-Subject: CN=admin\r\nX-Other: kept\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			seen = seenOf(resp.Header, body)
			check(t, "HTTP/1.1 trailers", seen, cert)
			if seen.Trailers.Get("X-Other") != "kept" {
				t.Errorf("trailers %v: the others pass", seen.Trailers)
			}

			// HTTP/2, head.
			nc, err := m.dial(t, "api.example.com", "h2", cert)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			_, seen = newH2Conn(t, nc).get(t, "api.example.com", forged...)
			check(t, "HTTP/2 head", seen, cert)
		})
	}
	// The cleartext listener: no certificate, and no forgery either.
	r := sendH1(t, m.testRelay.addr, rawReq{target: "/", host: "api.example.com", header: forged})
	check(t, "cleartext", seenOf(r.header, r.body), nil)
}

// A certificate revoked in a new CRL fails once the CRL is read again:
// at a reload, whatever the file's time says.
func TestClientAuthCRLReload(t *testing.T) {
	pki := newPKI(t)
	const yml = "client_auth:\n  - mode: require\n    ca_files: [$ca]\n    crl_files: [$crl]\n"
	m := startMTLS(t, pki, yml)
	if status, seen, err := m.get(t, "api.example.com", "api.example.com", pki.good); err != nil || status != 200 || seen.xfcc() == "" {
		t.Fatalf("before: %d %v %q", status, err, seen.xfcc())
	}
	pki.ca.WriteCRL(t, pki.crl, pki.revoked.Cert, pki.good.Cert)
	m.reload(t, pki, yml)
	if status, _, err := m.get(t, "api.example.com", "api.example.com", pki.good); err == nil {
		t.Errorf("a certificate the reloaded CRL revokes: answered %d", status)
	}
	// The access log and the rule are unchanged for another certificate.
	other := pki.ca.ClientWith(t, "other", testcert.ClientOptions{})
	if status, _, err := m.get(t, "api.example.com", "api.example.com", other); err != nil || status != 200 {
		t.Errorf("a certificate the CRL does not revoke: %d %v", status, err)
	}
}
