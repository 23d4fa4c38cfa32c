package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"relay/internal/testcert"
)

// clientAuthBase is a TLS listener with a certificate and a backend, for
// client_auth lines to follow.
func clientAuthBase(t *testing.T) string {
	ca := testcert.NewCA(t)
	srv := ca.Server(t, testcert.ECDSA, "a.example")
	return y(`tls_listen: ":8443"`, "tls_certificates:", certLines(srv)[0], certLines(srv)[1], "backends:", "  - http://127.0.0.1:8001")
}

func TestClientAuthSettings(t *testing.T) {
	ca := testcert.NewCA(t)
	crl := ca.WriteCRL(t, filepath.Join(t.TempDir(), "clients.crl"))
	der := filepath.Join(t.TempDir(), "clients.der")
	if err := os.WriteFile(der, ca.CRL(t), 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustParse(t, clientAuthBase(t)+y(
		"client_auth:",
		"  - hosts: [API.example.com, \"*.internal.example.com\"]",
		"    mode: require",
		"    ca_files: ["+ca.File+"]",
		"    crl_files: ["+crl+", "+der+"]",
		"    allow:",
		"      subjects: [\"CN=payments,O=Example\"]",
		"      dns: [svc.example.com]",
		"      uri: [\"spiffe://example.org/ns/prod/*\"]",
		"  - mode: request",
		"routes:",
		"  - match: {path_prefix: /a}",
		"    pool: default",
		"    client_cert_headers: fields",
		"    client_cert_pem: true",
	))
	if len(c.ClientAuth) != 2 {
		t.Fatalf("rules: %+v", c.ClientAuth)
	}
	r := c.ClientAuth[0]
	if strings.Join(r.Hosts, " ") != "api.example.com *.internal.example.com" || r.Mode != "require" || len(r.CAFiles) != 1 || len(r.CRLFiles) != 2 ||
		r.Allow.Subjects[0] != "CN=payments,O=Example" || r.Allow.DNS[0] != "svc.example.com" || r.Allow.URI[0] != "spiffe://example.org/ns/prod/*" {
		t.Errorf("rule 0: %+v", r)
	}
	if m, pem := c.ClientCertHeadersOf(nil); m != "xfcc" || pem {
		t.Errorf("top level: %s %v, want xfcc (a rule asks for certificates) without pem", m, pem)
	}
	if m, pem := c.ClientCertHeadersOf(&c.Routes[0]); m != "fields" || !pem {
		t.Errorf("route: %s %v, want fields with pem", m, pem)
	}
	h := NewClientAuthHosts(c.ClientAuth)
	for host, want := range map[string]int{
		"api.example.com": 0, "API.Example.COM.": 0, "api.example.com:8443": 0, "a.internal.example.com": 0,
		"a.b.internal.example.com": 1, "internal.example.com": 1, "": 1, "[::1]:443": 1, "other.example": 1,
	} {
		if got := h.Rule([]byte(host)); got != want {
			t.Errorf("Rule(%q) = %d, want %d", host, got, want)
		}
	}
	if !h.Differ {
		t.Error("rules with hosts and a default: Differ is false")
	}
	if m, _ := mustParse(t, clientAuthBase(t)).ClientCertHeadersOf(nil); m != "none" {
		t.Errorf("without client_auth: %s, want none", m)
	}
	if h := NewClientAuthHosts([]ClientAuthRule{{Mode: "require"}}); h.Differ || h.Rule([]byte("x.example")) != 0 {
		t.Errorf("a default rule alone: Differ %v, rule %d", h.Differ, h.Rule([]byte("x.example")))
	}
	if n := testing.AllocsPerRun(100, func() { h.Rule([]byte("API.example.com:443")) }); n != 0 {
		t.Errorf("Rule allocates %v times", n)
	}
}

// Each bad value of client_auth is one problem, under its key, saying
// what is wrong.
func TestClientAuthProblems(t *testing.T) {
	ca := testcert.NewCA(t)
	other := testcert.NewCA(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "x.pem")
	notes := filepath.Join(dir, "notes.pem")
	if err := writeFile(notes, "no certificate here\n"); err != nil {
		t.Fatal(err)
	}
	crl := ca.WriteCRL(t, filepath.Join(dir, "ok.crl"))
	foreign := other.WriteCRL(t, filepath.Join(dir, "foreign.crl"))
	garbage := filepath.Join(dir, "garbage.crl")
	if err := writeFile(garbage, "not a list"); err != nil {
		t.Fatal(err)
	}
	base := clientAuthBase(t)
	rule := func(lines ...string) string { return base + y(append([]string{"client_auth:"}, lines...)...) }
	tests := []struct {
		name, yaml, key, msg string
	}{
		{"unknown mode", rule("  - mode: requre", "    ca_files: ["+ca.File+"]"), "client_auth[0].mode", `must be one of none, request, require, verify_if_given; got "requre"; did you mean "require"?`},
		{"missing CA file", rule("  - hosts: [a.example]", "  - mode: require", "    ca_files: ["+missing+"]"), "client_auth[1].ca_files[0]", `"` + missing + `": no such file`},
		{"CA file without certificates", rule("  - mode: require", "    ca_files: ["+notes+"]"), "client_auth[0].ca_files[0]", "holds no PEM certificate"},
		{"CA file a directory", rule("  - mode: require", "    ca_files: ["+dir+"]"), "client_auth[0].ca_files[0]", "is a directory"},
		{"missing CRL file", rule("  - mode: require", "    ca_files: ["+ca.File+"]", "    crl_files: ["+missing+"]"), "client_auth[0].crl_files[0]", "no such file"},
		{"CRL of another CA", rule("  - mode: require", "    ca_files: ["+ca.File+"]", "    crl_files: ["+crl+", "+foreign+"]"), "client_auth[0].crl_files[1]", "is not signed by any certificate of the rule's ca_files"},
		{"CRL not a CRL", rule("  - mode: require", "    ca_files: ["+ca.File+"]", "    crl_files: ["+garbage+"]"), "client_auth[0].crl_files[0]", "is not a PEM or DER revocation list"},
		{"CRL without CA", rule("  - mode: request", "    crl_files: ["+crl+"]"), "client_auth[0].crl_files", "need the ca_files"},
		{"two default rules", rule("  - mode: none", "  - mode: require", "    ca_files: ["+ca.File+"]"), "client_auth[1]", "client_auth[0] (line 8) is the default already"},
		{"a host in two rules", rule("  - hosts: [a.example, b.example]", "  - hosts: [B.example]"), "client_auth[1].hosts[0]", `"b.example" is in client_auth[0] (line 8) too`},
		{"a host twice in a rule", rule("  - hosts: [a.example, a.example]"), "client_auth[0].hosts[1]", "listed twice"},
		{"require without CA", rule("  - mode: require"), "client_auth[0].ca_files", "mode require verifies client certificates, which needs ca_files"},
		{"verify_if_given without CA", rule("  - mode: verify_if_given"), "client_auth[0].ca_files", "mode verify_if_given verifies client certificates, which needs ca_files"},
		{"CA with mode none", rule("  - ca_files: [" + ca.File + "]"), "client_auth[0].ca_files", "mode is none"},
		{"allow without verifying", rule("  - mode: request", "    allow: {dns: [a.example]}"), "client_auth[0].allow", "has nothing to allow"},
		{"an IP address host", rule("  - hosts: [10.0.0.1]"), "client_auth[0].hosts[0]", "is an IP address"},
		{"a wildcard of a TLD", rule("  - hosts: [\"*.com\"]"), "client_auth[0].hosts[0]", "at least two labels"},
		{"a host with a port", rule("  - hosts: [a.example:443]"), "client_auth[0].hosts[0]", "holds a port"},
		{"a subject without =", rule("  - mode: require", "    ca_files: ["+ca.File+"]", "    allow: {subjects: [payments]}"), "client_auth[0].allow.subjects[0]", "is not a subject"},
		{"a URI without scheme", rule("  - mode: require", "    ca_files: ["+ca.File+"]", "    allow: {uri: [/ns/*]}"), "client_auth[0].allow.uri[0]", "is not a URI with a scheme"},
		{"a star inside a URI", rule("  - mode: require", "    ca_files: ["+ca.File+"]", "    allow: {uri: [\"spiffe://*/x\"]}"), "client_auth[0].allow.uri[0]", "only a trailing *"},
		{"unknown rule key", rule("  - mode: none", "    ca_file: x"), "client_auth[0].ca_file", `did you mean "ca_files"?`},
		{"not a list", base + y("client_auth: {mode: require}"), "client_auth", "must be a list of rules"},
		{"without tls_listen", y("backends: [http://127.0.0.1:8001]", "client_auth:", "  - mode: none"), "client_auth", "tls_listen is not set"},
		{"bad client_cert_headers", base + y("client_cert_headers: envoy"), "client_cert_headers", "must be one of none, xfcc, fields"},
		{"bad route client_cert_headers", base + y("routes:", "  - match: {path_prefix: /}", "    pool: default", "    client_cert_headers: pem"), "routes[0].client_cert_headers", "must be one of none, xfcc, fields"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "test.yml", testOpts)
			ps := problems(t, err)
			if len(ps) != 1 {
				t.Fatalf("want one problem, got %d:\n%v", len(ps), err)
			}
			if ps[0].Key != tc.key || !strings.Contains(ps[0].Msg, tc.msg) || ps[0].Line == 0 {
				t.Errorf("got %d %s: %s\nwant %s: ...%s...", ps[0].Line, ps[0].Key, ps[0].Msg, tc.key, tc.msg)
			}
		})
	}
}

// A cleartext listener beside a rule that requires certificates is
// warned of; a TLS-only relay is not.
func TestClientAuthWarnsOfCleartext(t *testing.T) {
	ca := testcert.NewCA(t)
	rule := y("client_auth:", "  - mode: require", "    ca_files: ["+ca.File+"]")
	ws := mustParse(t, clientAuthBase(t)+rule).Warnings(testOpts)
	if len(ws) != 1 || ws[0].Key != "client_auth[0].mode" || !strings.Contains(ws[0].Msg, "serves every host in cleartext") {
		t.Errorf("warnings %v", ws)
	}
	if ws := mustParse(t, y(`listen: ""`)+clientAuthBase(t)+rule).Warnings(testOpts); len(ws) != 0 {
		t.Errorf("without listen: %v", ws)
	}
}
