package acme

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"relay/internal/config"
)

// selfSigned makes a PEM certificate and key for names.
func selfSigned(t *testing.T, names ...string) Issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		DNSNames: names, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	is, err := Parse(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}))
	if err != nil {
		t.Fatal(err)
	}
	return is
}

func leafName(t *testing.T, s *Served, name string) string {
	t.Helper()
	c := s.Certificate(name)
	if c == nil {
		return ""
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

func TestServedPicksByName(t *testing.T) {
	var s Served
	if s.Certificate("a.relay.test") != nil {
		t.Fatal("an empty set gave a certificate")
	}
	if err := s.Put(selfSigned(t, "a.relay.test", "b.relay.test")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(selfSigned(t, "*.wild.relay.test")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"a.relay.test": "a.relay.test", "B.Relay.Test.": "a.relay.test",
		"x.wild.relay.test": "*.wild.relay.test", "y.x.wild.relay.test": "", "wild.relay.test": "",
		"c.relay.test": "", "": "",
	} {
		if got := leafName(t, &s, name); got != want {
			t.Errorf("%q got the certificate of %q, want %q", name, got, want)
		}
	}
	// A renewal replaces the certificate of its names only.
	if err := s.Put(selfSigned(t, "b.relay.test")); err != nil {
		t.Fatal(err)
	}
	if got := leafName(t, &s, "b.relay.test"); got != "b.relay.test" {
		t.Errorf("b got %q after its own certificate came", got)
	}
	if got := leafName(t, &s, "a.relay.test"); got != "a.relay.test" {
		t.Errorf("a got %q after b's certificate came", got)
	}
	// A pair that does not load changes nothing.
	bad := selfSigned(t, "a.relay.test")
	bad.Key = selfSigned(t, "other").Key
	if err := s.Put(bad); err == nil {
		t.Error("a certificate with another's key was taken")
	}
	if s.Len() != 3 {
		t.Errorf("%d names, want 3", s.Len())
	}
}

func TestNamesWithFilesAreNotOrdered(t *testing.T) {
	dir := t.TempDir()
	is := selfSigned(t, "files.relay.test", "*.wild.relay.test")
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	os.WriteFile(certFile, is.Chain, 0o600)
	os.WriteFile(keyFile, is.Key, 0o600)
	got := notInFiles([]string{"files.relay.test", "x.wild.relay.test", "ordered.relay.test"},
		[]config.Certificate{{CertFile: certFile, KeyFile: keyFile}, {CertFile: "/no/such", KeyFile: "/no/such"}})
	if !slices.Equal(got, []string{"ordered.relay.test"}) {
		t.Errorf("ordered %v, want only the name no file covers", got)
	}
}

// The default certificate is the first listed name's that is in hand.
func TestServingDefaultIsFirstNameInHand(t *testing.T) {
	s := NewServing([]string{"a.relay.test", "b.relay.test"}, nil)
	if s.Default() != nil {
		t.Fatal("a default before any certificate")
	}
	if err := s.Put(selfSigned(t, "b.relay.test")); err != nil {
		t.Fatal(err)
	}
	if c := s.Default(); c == nil || c != s.Certificate("b.relay.test") {
		t.Errorf("with b alone the default is %v, want b's", c)
	}
	if err := s.Put(selfSigned(t, "a.relay.test")); err != nil {
		t.Fatal(err)
	}
	if c := s.Default(); c != s.Certificate("a.relay.test") {
		t.Error("the default is not the first name's once it is in hand")
	}
}
