// Package testcert makes certificates for tests: a throwaway certificate
// authority and the server and client certificates it signs, written as
// PEM files into a test's temporary directory. Nothing it makes outlives
// the test, so nothing committed can expire.
package testcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority that lives for one test.
type CA struct {
	Cert *x509.Certificate
	key  crypto.Signer
	// File is the CA certificate as a PEM file, for tls_ca_file settings.
	File string
	// Pool holds the CA certificate, for Go clients' RootCAs.
	Pool *x509.CertPool
	dir  string
}

// Pair is a certificate and its key as PEM files.
type Pair struct {
	CertFile, KeyFile string
	Cert              *x509.Certificate
	// TLS is the pair loaded for crypto/tls.
	TLS tls.Certificate
}

// Key kinds for Issue.
const (
	ECDSA = "ecdsa"
	RSA   = "rsa"
)

// NewCA makes a CA whose files live in t's temporary directory.
func NewCA(t testing.TB) *CA {
	t.Helper()
	key := newKey(t, ECDSA)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "relay test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{Cert: cert, key: key, dir: t.TempDir(), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.File = filepath.Join(ca.dir, "ca.pem")
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for names (DNS names or IP
// addresses; the first is also the common name) with a key of kind.
func (ca *CA) Server(t testing.TB, kind string, names ...string) *Pair {
	t.Helper()
	return ca.issue(t, kind, x509.ExtKeyUsageServerAuth, names)
}

// Client issues a client certificate named name, for mutual TLS.
func (ca *CA) Client(t testing.TB, name string) *Pair {
	t.Helper()
	return ca.issue(t, ECDSA, x509.ExtKeyUsageClientAuth, []string{name})
}

func (ca *CA) issue(t testing.TB, kind string, usage x509.ExtKeyUsage, names []string) *Pair {
	key := newKey(t, kind)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: names[0]},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), names[0])
	p := &Pair{CertFile: base + ".crt", KeyFile: base + ".key", Cert: cert}
	writePEM(t, p.CertFile, "CERTIFICATE", der)
	writePEM(t, p.KeyFile, "PRIVATE KEY", keyDER)
	if p.TLS, err = tls.LoadX509KeyPair(p.CertFile, p.KeyFile); err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t testing.TB, kind string) crypto.Signer {
	var (
		k   crypto.Signer
		err error
	)
	switch kind {
	case RSA:
		k, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ClientOptions shape a client certificate (ClientWith).
type ClientOptions struct {
	// Subject is the certificate's subject; its CommonName defaults to
	// the name given.
	Subject pkix.Name
	// DNS and URIs are its subject alternative names.
	DNS, URIs []string
	// NotBefore and NotAfter bound its validity; zero: from an hour ago
	// to a day from now.
	NotBefore, NotAfter time.Time
}

// ClientWith issues a client certificate named name shaped by o.
func (ca *CA) ClientWith(t testing.TB, name string, o ClientOptions) *Pair {
	t.Helper()
	key := newKey(t, ECDSA)
	subject := o.Subject
	if subject.CommonName == "" {
		subject.CommonName = name
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      subject,
		NotBefore:    o.NotBefore,
		NotAfter:     o.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     o.DNS,
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = time.Now().Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	}
	for _, u := range o.URIs {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	return ca.sign(t, tmpl, key, name)
}

func (ca *CA) sign(t testing.TB, tmpl *x509.Certificate, key crypto.Signer, name string) *Pair {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), name)
	p := &Pair{CertFile: base + ".crt", KeyFile: base + ".key", Cert: cert}
	writePEM(t, p.CertFile, "CERTIFICATE", der)
	writePEM(t, p.KeyFile, "PRIVATE KEY", keyDER)
	if p.TLS, err = tls.LoadX509KeyPair(p.CertFile, p.KeyFile); err != nil {
		t.Fatal(err)
	}
	return p
}

// CRL returns a revocation list signed by ca that revokes certs, DER.
func (ca *CA) CRL(t testing.TB, certs ...*x509.Certificate) []byte {
	t.Helper()
	tmpl := &x509.RevocationList{
		Number:     serial(t),
		ThisUpdate: time.Now().Add(-time.Minute),
		NextUpdate: time.Now().Add(24 * time.Hour),
	}
	for _, c := range certs {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: c.SerialNumber, RevocationTime: time.Now().Add(-time.Minute)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// WriteCRL writes ca's revocation list of certs to path, as PEM, and
// returns path.
func (ca *CA) WriteCRL(t testing.TB, path string, certs ...*x509.Certificate) string {
	t.Helper()
	writePEM(t, path, "X509 CRL", ca.CRL(t, certs...))
	return path
}
