package core

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"relay/internal/testcert"
)

// What a backend is told of a client certificate (clientcert.go),
// through the fake door.

// certCore is a core whose pool has the client certificate feature f,
// over one backend.
func certCore(t *testing.T, f Feature) (*Core, *testBackend) {
	t.Helper()
	tb := serving(t, "ok", nil)
	pc := testPool()
	if f != nil {
		pc.Features = []Feature{f}
	}
	c, _ := startCore(t, Config{}, pc, tb.b)
	return c, tb
}

// verified is what a connection whose handshake verified cert has.
func verified(c *Core, sni string, cert *x509.Certificate) *ClientTLS {
	cs := &tls.ConnectionState{ServerName: sni}
	if cert != nil {
		cs.PeerCertificates = []*x509.Certificate{cert}
		cs.VerifiedChains = [][]*x509.Certificate{{cert}}
	}
	return c.ClientTLSOf(cs)
}

func TestClientCertXFCC(t *testing.T) {
	ca := testcert.NewCA(t)
	p := ca.ClientWith(t, "payments", testcert.ClientOptions{
		Subject: pkix.Name{CommonName: `pay"ments`, Organization: []string{"Example, Inc"}},
		DNS:     []string{"svc.example.com", "b.example.com"},
		URIs:    []string{"spiffe://example.org/ns/prod/sa/payments", "urn:x:a=b"},
	})
	c, tb := certCore(t, NewClientCertHeaders("xfcc", false))
	ct := verified(c, "api.example.com", p.Cert)
	r := do(c, req{clientTLS: ct, tls: true, fields: "X-Forwarded-Client-Cert: Hash=forged\r\n"})
	if r.status != 200 {
		t.Fatalf("%d %q", r.status, r.body)
	}
	sum := sha256.Sum256(p.Cert.Raw)
	subject := p.Cert.Subject.String() // CN=pay\"ments,O=Example\, Inc
	want := "Hash=" + hex.EncodeToString(sum[:]) + `;Subject="` + strings.ReplaceAll(subject, `"`, `\"`) + `"` +
		";URI=spiffe://example.org/ns/prod/sa/payments" + `;URI="urn:x:a=b"` + ";DNS=svc.example.com;DNS=b.example.com"
	if got := tb.last().Header["X-Forwarded-Client-Cert"]; len(got) != 1 || got[0] != want {
		t.Errorf("X-Forwarded-Client-Cert:\n got %q\nwant [%q]", got, want)
	}
	if string(ct.Subject()) != subject {
		t.Errorf("subject for the access log %q, want %q", ct.Subject(), subject)
	}

	// No certificate, or one relay did not verify: nothing, and the
	// client's own is gone still.
	for _, ct := range []*ClientTLS{nil, verified(c, "api.example.com", nil), c.ClientTLSOf(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{p.Cert}})} {
		do(c, req{clientTLS: ct, fields: "X-Forwarded-Client-Cert: Hash=forged\r\nx-client-cert-subject: CN=admin\r\n"})
		if h := tb.last().Header; len(h["X-Forwarded-Client-Cert"]) != 0 || len(h["X-Client-Cert-Subject"]) != 0 {
			t.Errorf("without a verified certificate the backend got %v", h)
		}
	}
}

func TestClientCertFields(t *testing.T) {
	ca := testcert.NewCA(t)
	p := ca.ClientWith(t, "payments", testcert.ClientOptions{DNS: []string{"svc.example.com"}, URIs: []string{"spiffe://example.org/a"}})
	for _, pem := range []bool{false, true} {
		c, tb := certCore(t, NewClientCertHeaders("fields", pem))
		ct := verified(c, "", p.Cert)
		forged := "X-Client-Cert: :AAAA:\r\nX-Client-Cert-Subject: CN=admin\r\nX-Client-Cert-Issuer: x\r\nX-Client-Cert-Serial: 1\r\n" +
			"X-Client-Cert-Fingerprint: 00\r\nX-Client-Cert-DNS: admin\r\nX-Client-Cert-URI: spiffe://evil\r\n"
		if r := do(c, req{clientTLS: ct, fields: forged}); r.status != 200 {
			t.Fatalf("%d %q", r.status, r.body)
		}
		sum := sha256.Sum256(p.Cert.Raw)
		want := map[string]string{
			"X-Client-Cert-Subject":     p.Cert.Subject.String(),
			"X-Client-Cert-Issuer":      ca.Cert.Subject.String(),
			"X-Client-Cert-Serial":      hex.EncodeToString(p.Cert.SerialNumber.Bytes()),
			"X-Client-Cert-Fingerprint": hex.EncodeToString(sum[:]),
			"X-Client-Cert-DNS":         "svc.example.com",
			"X-Client-Cert-URI":         "spiffe://example.org/a",
		}
		if pem {
			want["X-Client-Cert"] = ":" + base64.StdEncoding.EncodeToString(p.Cert.Raw) + ":"
		}
		h := tb.last().Header
		for k, v := range want {
			if got := h.Values(k); len(got) != 1 || got[0] != v {
				t.Errorf("pem %v: %s = %q, want [%q]", pem, k, got, v)
			}
		}
		if !pem && len(h["X-Client-Cert"]) != 0 {
			t.Errorf("without pem the backend got X-Client-Cert %q", h["X-Client-Cert"])
		}
	}
}

// A client's fields about client certificates never reach a backend:
// in the head or in the trailers, whatever the route says, certificate
// or not, trusted proxy or not.
func TestClientCertFieldsOfClientsRemoved(t *testing.T) {
	ca := testcert.NewCA(t)
	p := ca.Client(t, "payments")
	c, tb := certCore(t, nil) // client_cert_headers: none
	for _, ct := range []*ClientTLS{nil, verified(c, "", p.Cert)} {
		r := do(c, req{method: "POST", clientTLS: ct, body: "x", trailers: "X-Forwarded-Client-Cert: Hash=forged\r\nX-Client-Cert-Subject: CN=admin\r\nX-Kept: yes\r\n",
			fields: "X-FORWARDED-CLIENT-CERT: Hash=forged\r\nX-Client-Cert: :AAAA:\r\nX-Client-Cert-Uri: spiffe://evil\r\nTrailer: X-Forwarded-Client-Cert\r\n"})
		if r.status != 200 {
			t.Fatalf("%d %q", r.status, r.body)
		}
		got := tb.last()
		for _, h := range []map[string][]string{got.Header, got.Trailer} {
			for k := range h {
				if strings.HasPrefix(strings.ToLower(k), "x-client-cert") || strings.EqualFold(k, "x-forwarded-client-cert") {
					t.Errorf("the backend got the client's %s: %q", k, h[k])
				}
			}
		}
		if got.Trailer.Get("X-Kept") != "yes" {
			t.Errorf("trailers %v: the others must pass", got.Trailer)
		}
	}
}

// hostRuleMap is HostRules over a map of exact names; others get -1.
type hostRuleMap map[string]int

func (m hostRuleMap) Rule(host []byte) int {
	if i := strings.IndexByte(string(host), ':'); i >= 0 {
		host = host[:i]
	}
	if r, ok := m[strings.ToLower(string(host))]; ok {
		return r
	}
	return -1
}

// A TLS request whose host has another client certificate rule than its
// connection's SNI name is answered 421 and reaches no backend; the
// same rule, a cleartext request, or rules that do not differ pass.
func TestMisdirectedRequest(t *testing.T) {
	c, tb := certCore(t, nil)
	c.SetHostRules(hostRuleMap{"api.example.com": 0, "*.api.example.com": 0, "www.example.com": 1, "also.example.com": 1})
	for _, tt := range []struct {
		name, sni, host string
		cleartext       bool
		want            int
	}{
		{"same name", "api.example.com", "api.example.com", false, 200},
		{"port and case", "api.example.com", "API.example.com:8443", false, 200},
		{"another name of the same rule", "www.example.com", "also.example.com", false, 200},
		{"another rule", "www.example.com", "api.example.com", false, 421},
		{"no SNI: the default rule", "", "api.example.com", false, 421},
		{"no SNI, a host of the default rule", "", "other.example.com", false, 200},
		{"a default-rule name to a named rule", "other.example.com", "www.example.com", false, 421},
		{"cleartext", "", "api.example.com", true, 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := tb.hits.Load()
			r := req{host: tt.host, tls: !tt.cleartext}
			if !tt.cleartext {
				r.clientTLS = verified(c, tt.sni, nil)
			}
			got := do(c, r)
			if got.status != tt.want {
				t.Fatalf("SNI %q, Host %q: %d %q, want %d", tt.sni, tt.host, got.status, got.body, tt.want)
			}
			if tt.want == 421 {
				if want := "Misdirected Request: "; !strings.HasPrefix(got.body, want) {
					t.Errorf("body %q, want it to begin %q", got.body, want)
				}
				if tb.hits.Load() != before {
					t.Error("the backend got a misdirected request")
				}
			}
		})
	}
	c.SetHostRules(nil)
	if r := do(c, req{host: "api.example.com", tls: true, clientTLS: verified(c, "www.example.com", nil)}); r.status != 200 {
		t.Errorf("with one rule for every host: %d, want 200", r.status)
	}
}
