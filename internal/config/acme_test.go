package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestACMESection(t *testing.T) {
	c := mustParse(t, y(
		"listen: :8080",
		"tls_listen: :8443",
		"backends: [http://127.0.0.1:9000]",
		"acme:",
		"  email: ops@example.com",
		"  domains: [Example.COM., www.example.com]",
	))
	a := c.ACME
	if a == nil {
		t.Fatal("no ACME settings")
	}
	if a.CA != DefaultACMECA || a.KeyType != "ecdsa-p256" || a.CheckInterval != DefaultACMECheckInterval {
		t.Errorf("defaults: %+v", a)
	}
	if !slices.Equal(a.Domains, []string{"example.com", "www.example.com"}) {
		t.Errorf("domains %v", a.Domains)
	}
	if !slices.Equal(a.Challenges, []string{"tls-alpn-01"}) {
		t.Errorf("challenges %v, want tls-alpn-01", a.Challenges)
	}
	if a.Storage != (ACMEStorage{Type: "file", Dir: DefaultACMEDir}) {
		t.Errorf("storage %+v", a.Storage)
	}

	c = mustParse(t, y(
		"listen: \"\"",
		"tls_listen: :8443",
		"backends: [http://127.0.0.1:9000]",
		"redis: {address: 127.0.0.1:6379}",
		"acme: {domains: [a.example.com], storage: {type: redis}, check_interval: 1s}",
	))
	if c.ACME.Storage.Prefix != DefaultACMERedisPrefix || c.ACME.CheckInterval != time.Second {
		t.Errorf("storage %+v, interval %v", c.ACME.Storage, c.ACME.CheckInterval)
	}
}

func TestACMEProblems(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.pem")
	os.WriteFile(empty, []byte("nothing"), 0o644)
	base := "listen: :8080\ntls_listen: :8443\nbackends: [http://127.0.0.1:9000]\n"
	for _, tc := range []struct{ yaml, key, msg string }{
		{"acme: [x]", "acme", "must be a mapping"},
		{"acme: {}", "acme.domains", "missing"},
		{"acme: {domains: ['*.example.com']}", "acme.domains[0]", "wildcard"},
		{"acme: {domains: [localhost]}", "acme.domains[0]", "no dot"},
		{"acme: {domains: [192.0.2.1]}", "acme.domains[0]", "is an address"},
		{"acme: {domains: [a.example.com, A.example.com]}", "acme.domains[1]", "listed twice"},
		{"acme: {domains: [a b.example.com]}", "acme.domains[0]", "not a host name"},
		{"acme: {domains: [a.example.com], ca: http://ca.example/dir}", "acme.ca", "https://HOST/PATH"},
		{"acme: {domains: [a.example.com], ca_root: /no/such.pem}", "acme.ca_root", "no such file"},
		{"acme: {domains: [a.example.com], ca_root: " + empty + "}", "acme.ca_root", "holds no PEM certificate"},
		{"acme: {domains: [a.example.com], email: nobody}", "acme.email", "not an email address"},
		{"acme: {domains: [a.example.com], key_type: rsa1024}", "acme.key_type", "rsa1024"},
		{"acme: {domains: [a.example.com], challenges: [dns-01]}", "acme.challenges[0]", "http-01 or tls-alpn-01"},
		{"acme: {domains: [a.example.com], challenges: []}", "acme.challenges", "must name tls-alpn-01, http-01 or both"},
		{"acme: {domains: [a.example.com], storage: {type: s3}}", "acme.storage.type", "s3"},
		{"acme: {domains: [a.example.com], storage: {type: etcd}}", "acme.storage.type", "no discovery.etcd section"},
		{"acme: {domains: [a.example.com], storage: {type: redis}}", "acme.storage.type", "no redis section"},
		{"acme: {domains: [a.example.com], storage: {dirr: x}}", "acme.storage.dirr", "did you mean"},
		{"acme: {domains: [a.example.com], check_interval: 10ms}", "acme.check_interval", "at least 1s"},
	} {
		ps := problems(t, parseErr(base+tc.yaml))
		found := false
		for _, p := range ps {
			if p.Key == tc.key && strings.Contains(p.Msg, tc.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: problems %v, want %s: ...%s...", tc.yaml, ps, tc.key, tc.msg)
		}
	}
	ps := problems(t, parseErr("listen: \":8080\"\nbackends: [http://127.0.0.1:9000]\nacme: {domains: [a.example.com]}\n"))
	if ps[0].Key != "acme" || !strings.Contains(ps[0].Msg, "tls_listen") {
		t.Errorf("without tls_listen: %v", ps)
	}
	ps = problems(t, parseErr("tls_listen: 127.0.0.1:0\nbackends: [http://127.0.0.1:9000]\nacme: {domains: [a.example.com]}\n"))
	if ps[0].Key != "acme" || !strings.Contains(ps[0].Msg, "cannot be told") {
		t.Errorf("with tls_listen on port 0: %v", ps)
	}
	ps = problems(t, parseErr("listen: \"\"\ntls_listen: :8443\nbackends: [http://127.0.0.1:9000]\nacme: {domains: [a.example.com], challenges: [http-01]}\n"))
	if len(ps) != 1 || ps[0].Key != "acme.challenges" || !strings.Contains(ps[0].Msg, "listen is off") {
		t.Errorf("http-01 without a cleartext listener: %v", ps)
	}
	ps = problems(t, parseErr("listen: 127.0.0.1:0\ntls_listen: :8443\nbackends: [http://127.0.0.1:9000]\nacme: {domains: [a.example.com], challenges: [http-01]}\n"))
	if len(ps) != 1 || ps[0].Key != "acme.challenges" || !strings.Contains(ps[0].Msg, "cannot be told") {
		t.Errorf("http-01 with listen on port 0: %v", ps)
	}
}

// TestACMEChallengesByListener: http-01 is accepted beside a cleartext
// listener on any port (one other than 80 is reached through a port
// map), and an acme section that names no challenge takes both when
// listen is on port 80, tls-alpn-01 alone otherwise or without listen.
func TestACMEChallengesByListener(t *testing.T) {
	for _, tc := range []struct {
		listen, challenges string
		want               []string
	}{
		{":80", "", []string{"tls-alpn-01", "http-01"}},
		{"127.0.0.1:80", "", []string{"tls-alpn-01", "http-01"}},
		{":8080", "", []string{"tls-alpn-01"}},
		{`""`, "", []string{"tls-alpn-01"}},
		{":8080", ", challenges: [http-01]", []string{"http-01"}},
		{":80", ", challenges: [tls-alpn-01]", []string{"tls-alpn-01"}},
		{":80", ", challenges: [http-01, tls-alpn-01]", []string{"http-01", "tls-alpn-01"}},
	} {
		c := mustParse(t, "listen: "+tc.listen+"\ntls_listen: :8443\nbackends: [http://127.0.0.1:9000]\nacme: {domains: [a.example.com]"+tc.challenges+"}\n")
		if !slices.Equal(c.ACME.Challenges, tc.want) {
			t.Errorf("listen %s%s: challenges %v, want %v", tc.listen, tc.challenges, c.ACME.Challenges, tc.want)
		}
	}
}

func parseErr(yaml string) error {
	_, err := Parse([]byte(yaml), "test.yml", testOpts)
	return err
}
