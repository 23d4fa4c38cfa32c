package config

import (
	"path/filepath"
	"strings"
	"testing"

	"relay/internal/testcert"
)

func certLines(p *testcert.Pair) []string {
	return []string{"  - cert_file: " + p.CertFile, "    key_file: " + p.KeyFile}
}

func TestTLSListenerSettings(t *testing.T) {
	ca := testcert.NewCA(t)
	ec := ca.Server(t, testcert.ECDSA, "a.example")
	rsa := ca.Server(t, testcert.RSA, "b.example")
	lines := []string{"listen: \"\"", "tls_listen: 127.0.0.1:8443", "h2c: true", "tls_certificates:"}
	lines = append(lines, certLines(ec)...)
	lines = append(lines, certLines(rsa)...)
	lines = append(lines, "backends:", "  - http://127.0.0.1:8001")
	c := mustParse(t, y(lines...))
	if c.Listen != "" || c.TLSListen != "127.0.0.1:8443" || !c.H2C || c.TLSMinVersion != "1.2" {
		t.Errorf("listen %q, tls_listen %q, h2c %v, tls_min_version %q", c.Listen, c.TLSListen, c.H2C, c.TLSMinVersion)
	}
	if len(c.TLSCertificates) != 2 || c.TLSCertificates[1].KeyFile != rsa.KeyFile || c.TLSCertificates[1].Line != 7 {
		t.Errorf("certificates: %+v", c.TLSCertificates)
	}
	if _, err := LoadCertificate(c.TLSCertificates[1]); err != nil {
		t.Error(err)
	}
}

// Each mistake in the TLS settings is one problem, under its key, saying
// what is wrong in words.
func TestTLSProblems(t *testing.T) {
	ca := testcert.NewCA(t)
	a := ca.Server(t, testcert.ECDSA, "a.example")
	b := ca.Server(t, testcert.RSA, "b.example")
	missing := filepath.Join(t.TempDir(), "gone.pem")
	text := filepath.Join(t.TempDir(), "notes.txt")
	if err := writeFile(text, "not a PEM file\n"); err != nil {
		t.Fatal(err)
	}
	const be = "backends:\n  - http://127.0.0.1:8001"
	cert := func(certFile, keyFile string) string {
		return "tls_listen: \":8443\"\ntls_certificates:\n  - cert_file: " + certFile + "\n    key_file: " + keyFile
	}
	tests := []struct {
		name, yaml, key, msg string
	}{
		{"no listener at all", y(`listen: ""`, be), "listen", "relay needs a listener: set listen, tls_listen or both"},
		{"tls without certificates", y(`tls_listen: ":8443"`, be), "tls_listen", "TLS needs at least one certificate"},
		{"certificates without tls", y("tls_certificates:", certLines(a)[0], certLines(a)[1], be), "tls_certificates", "tls_listen is not set"},
		{"key of another certificate", y(cert(a.CertFile, b.KeyFile), be), "tls_certificates", "tls_certificates[0]: certificate"},
		{"missing file", y(cert(missing, a.KeyFile), be), "tls_certificates", "gone.pem\": no such file"},
		{"key file not PEM", y(cert(a.CertFile, text), be), "tls_certificates", "notes.txt\" holds no PEM private key"},
		{"cert file not PEM", y(cert(text, a.KeyFile), be), "tls_certificates", "notes.txt\" holds no PEM certificate"},
		{"files switched", y(cert(a.KeyFile, a.CertFile), be), "tls_certificates", "PEM inputs may have been switched"},
		{"key_file missing", y(`tls_listen: ":8443"`, "tls_certificates:", "  - cert_file: "+a.CertFile, be), "tls_certificates", "key_file is missing"},
		{"unknown certificate key", y(cert(a.CertFile, a.KeyFile), "    chain_file: x", be), "tls_certificates[0].chain_file", "unknown key"},
		{"certificates not a list", y(`tls_listen: ":8443"`, "tls_certificates: "+a.CertFile, be), "tls_certificates", "must be a list of certificates"},
		{"same port as listen", y("listen: 127.0.0.1:8443", cert(a.CertFile, a.KeyFile), be), "tls_listen", "is also the cleartext listen address"},
		{"same port as admin", y("admin_listen: 127.0.0.1:8443", cert(a.CertFile, a.KeyFile), be), "tls_listen", "is also the admin listen address"},
		{"bad tls_listen", y(`tls_listen: "8443"`, "tls_certificates:", certLines(a)[0], certLines(a)[1], be), "tls_listen", "is not HOST:PORT"},
		{"tls 1.1", y(`tls_min_version: "1.1"`, be), "tls_min_version", `must be "1.2" or "1.3", got "1.1"`},
		{"h2c not a bool", y("h2c: yes please", be), "h2c", "must be true or false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "test.yml", testOpts)
			ps := problems(t, err)
			if len(ps) != 1 {
				t.Fatalf("want one problem, got %d:\n%v", len(ps), err)
			}
			if ps[0].Key != tc.key || !strings.Contains(ps[0].Msg, tc.msg) {
				t.Errorf("got %s: %s\nwant %s: ...%s...", ps[0].Key, ps[0].Msg, tc.key, tc.msg)
			}
		})
	}
}

// A mismatched pair is named with both files and the reason.
func TestMismatchedPairSaysWhy(t *testing.T) {
	ca := testcert.NewCA(t)
	a := ca.Server(t, testcert.ECDSA, "a.example")
	b := ca.Server(t, testcert.ECDSA, "b.example")
	_, err := LoadCertificate(Certificate{CertFile: a.CertFile, KeyFile: b.KeyFile})
	if err == nil || !strings.Contains(err.Error(), "the private key does not belong to the certificate") ||
		!strings.Contains(err.Error(), a.CertFile) || !strings.Contains(err.Error(), b.KeyFile) {
		t.Errorf("got %v", err)
	}
}

// A backend's own TLS settings override the backend_tls_ defaults, false
// included; settings it leaves out come from the defaults.
func TestBackendTLSSettingsOverrideTheDefaults(t *testing.T) {
	c := mustParse(t, y("backend_tls_insecure_skip_verify: true", "backend_tls_server_name: default.example",
		"backends:",
		"  - url: https://127.0.0.1:8443",
		"    tls_insecure_skip_verify: false",
		"  - url: https://127.0.0.1:8444",
		"    tls_server_name: own.example"))
	if b := c.Backends[0].TLS; b.InsecureSkipVerify || b.ServerName != "default.example" {
		t.Errorf("first backend: insecure %v, server name %q; want false and the default's", b.InsecureSkipVerify, b.ServerName)
	}
	if b := c.Backends[1].TLS; !b.InsecureSkipVerify || b.ServerName != "own.example" {
		t.Errorf("second backend: insecure %v, server name %q; want the default's true and its own", b.InsecureSkipVerify, b.ServerName)
	}
}
