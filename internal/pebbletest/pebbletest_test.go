package pebbletest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3/acme"
	"github.com/miekg/dns"
	"go.uber.org/zap"

	"relay/internal/pebbletest"
	"relay/internal/testaddr"
)

// client is a certmagic configuration of a test's own that gets its
// certificates from ca, with file storage in the test's temporary
// directory.
type client struct {
	cfg *certmagic.Config
	iss *certmagic.ACMEIssuer
}

// newClient is a client of ca; tmpl gives the challenge settings.
func newClient(t *testing.T, ca *pebbletest.CA, tmpl certmagic.ACMEIssuer) *client {
	t.Helper()
	var cfg *certmagic.Config
	cache := certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(certmagic.Certificate) (*certmagic.Config, error) { return cfg, nil },
		Logger:           zap.NewNop(),
	})
	t.Cleanup(cache.Stop)
	cfg = certmagic.New(cache, certmagic.Config{
		Storage: &certmagic.FileStorage{Path: t.TempDir()},
		Logger:  zap.NewNop(),
	})
	tmpl.CA = ca.DirectoryURL()
	tmpl.TrustedRoots = ca.RootPool()
	tmpl.Agreed = true
	// With no email, an interactive obtain would ask for one on stdin.
	tmpl.Email = "tests@relay.test"
	tmpl.ListenHost = "127.0.0.1"
	tmpl.Logger = zap.NewNop()
	iss := certmagic.NewACMEIssuer(cfg, tmpl)
	cfg.Issuers = []certmagic.Issuer{iss}
	return &client{cfg: cfg, iss: iss}
}

// obtain gets a certificate for name in the foreground, without
// certmagic's retries.
func (c *client) obtain(t *testing.T, name string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return c.cfg.ObtainCertSync(ctx, name)
}

// chain is the certificate chain stored for name, leaf first.
func (c *client) chain(t *testing.T, name string) []*x509.Certificate {
	t.Helper()
	b, err := c.cfg.Storage.Load(t.Context(), certmagic.StorageKeys.SiteCert(c.iss.IssuerKey(), name))
	if err != nil {
		t.Fatalf("certificate of %s: %v", name, err)
	}
	var chain []*x509.Certificate
	for {
		var block *pem.Block
		if block, b = pem.Decode(b); block == nil {
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, cert)
	}
	if len(chain) == 0 {
		t.Fatalf("no certificate stored for %s", name)
	}
	return chain
}

// freePort is a port for a challenge listener that certmagic opens.
func freePort(t *testing.T) int {
	p, err := strconv.Atoi(testaddr.FreePort(t))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// verify checks that chain is a certificate for name that ca issued.
func verify(t *testing.T, ca *pebbletest.CA, name string, chain []*x509.Certificate) {
	t.Helper()
	inter := ca.Intermediates()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{DNSName: name, Roots: ca.IssuerRoots(), Intermediates: inter}); err != nil {
		t.Errorf("certificate of %s: %v", name, err)
	}
	// The chain the CA sent verifies too, with no help from Intermediates.
	sent := x509.NewCertPool()
	for _, c := range chain[1:] {
		sent.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{DNSName: name, Roots: ca.IssuerRoots(), Intermediates: sent}); err != nil {
		t.Errorf("certificate of %s with the chain sent: %v", name, err)
	}
}

func TestHTTP01TwoNames(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	const validity = 2 * time.Hour
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port, Validity: validity})
	c := newClient(t, ca, certmagic.ACMEIssuer{AltHTTPPort: port, DisableTLSALPNChallenge: true})

	names := []string{"a.relay.test", "b.relay.test"}
	for _, name := range names {
		if err := c.obtain(t, name); err != nil {
			t.Fatalf("obtain %s: %v", name, err)
		}
	}
	if n := ca.Orders(); n != 2 {
		t.Errorf("Orders() = %d, want 2: one for each name", n)
	}
	if n := ca.Issued(); n != 2 {
		t.Errorf("Issued() = %d, want 2", n)
	}
	for _, name := range names {
		if n := ca.OrdersFor(name); n != 1 {
			t.Errorf("OrdersFor(%s) = %d, want 1", name, n)
		}
		chain := c.chain(t, name)
		verify(t, ca, name, chain)
		leaf := chain[0]
		if got := leaf.NotAfter.Sub(leaf.NotBefore); got != validity-time.Second {
			t.Errorf("%s: NotAfter - NotBefore = %v, want %v (Validity less Pebble's inclusive last second)", name, got, validity-time.Second)
		}
		if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != name {
			t.Errorf("%s: DNS names %q", name, leaf.DNSNames)
		}
	}
	if n := ca.OrdersFor("c.relay.test"); n != 0 {
		t.Errorf("OrdersFor(c.relay.test) = %d, want 0", n)
	}

	// Obtaining again is certmagic's no-op: the certificate is in storage.
	if err := c.obtain(t, names[0]); err != nil {
		t.Fatal(err)
	}
	if n := ca.Orders(); n != 2 {
		t.Errorf("after a second obtain from storage, Orders() = %d, want 2", n)
	}
}

func TestTLSALPN01(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	ca := pebbletest.Start(t, pebbletest.Options{TLSPort: port})
	c := newClient(t, ca, certmagic.ACMEIssuer{AltTLSALPNPort: port, DisableHTTPChallenge: true})

	const name = "alpn.relay.test"
	if err := c.obtain(t, name); err != nil {
		t.Fatalf("obtain: %v", err)
	}
	if n := ca.Orders(); n != 1 {
		t.Errorf("Orders() = %d, want 1", n)
	}
	if n := ca.OrdersFor(name); n != 1 {
		t.Errorf("OrdersFor(%s) = %d, want 1", name, n)
	}
	if n := ca.Issued(); n != 1 {
		t.Errorf("Issued() = %d, want 1", n)
	}
	chain := c.chain(t, name)
	verify(t, ca, name, chain)
	// Zero Validity is Pebble's default, 90 days.
	if got, want := chain[0].NotAfter.Sub(chain[0].NotBefore), 90*24*time.Hour-time.Second; got != want {
		t.Errorf("NotAfter - NotBefore = %v, want %v", got, want)
	}
}

// A CA that is down at first fails the obtain, creating no order; once it
// is back, on the same address, the same client succeeds.
func TestStopRestart(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port})
	c := newClient(t, ca, certmagic.ACMEIssuer{AltHTTPPort: port, DisableTLSALPNChallenge: true})
	dir := ca.DirectoryURL()

	ca.Stop()
	ca.Stop() // a second Stop does nothing
	err := c.obtain(t, "down.relay.test")
	if err == nil {
		t.Fatal("obtain from a stopped CA succeeded")
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("obtain from a stopped CA: %v, want connection refused", err)
	}
	if n := ca.Orders(); n != 0 {
		t.Errorf("Orders() = %d while down, want 0", n)
	}

	ca.Restart()
	if ca.DirectoryURL() != dir {
		t.Errorf("DirectoryURL() = %s after Restart, was %s", ca.DirectoryURL(), dir)
	}
	if err := c.obtain(t, "down.relay.test"); err != nil {
		t.Fatalf("obtain after Restart: %v", err)
	}
	if n := ca.Orders(); n != 1 {
		t.Errorf("Orders() = %d, want 1", n)
	}

	// The database outlives a restart: the account is still known, and
	// its orders are still counted.
	ca.Stop()
	ca.Restart()
	if err := c.obtain(t, "again.relay.test"); err != nil {
		t.Fatalf("obtain after a second Restart: %v", err)
	}
	if n, m := ca.Orders(), ca.Issued(); n != 2 || m != 2 {
		t.Errorf("Orders(), Issued() = %d, %d, want 2, 2", n, m)
	}
}

func TestGarbage(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port})
	c := newClient(t, ca, certmagic.ACMEIssuer{AltHTTPPort: port, DisableTLSALPNChallenge: true})

	ca.Garbage(true)
	status, body := get(t, ca, ca.DirectoryURL())
	if status != http.StatusOK || json.Valid(body) {
		t.Errorf("directory while Garbage: %d %q, want 200 and not JSON", status, body)
	}
	if err := c.obtain(t, "garbage.relay.test"); err == nil {
		t.Fatal("obtain from a CA answering garbage succeeded")
	} else {
		t.Logf("obtain while Garbage: %v", err)
	}
	if n := ca.Orders(); n != 0 {
		t.Errorf("Orders() = %d while Garbage, want 0", n)
	}

	ca.Garbage(false)
	if err := c.obtain(t, "garbage.relay.test"); err != nil {
		t.Fatalf("obtain after Garbage(false): %v", err)
	}
	if n := ca.Orders(); n != 1 {
		t.Errorf("Orders() = %d, want 1", n)
	}

	// A client that has read the directory does not read it again; it
	// still fails, on the next request.
	ca.Garbage(true)
	if err := c.obtain(t, "garbage2.relay.test"); err == nil {
		t.Fatal("obtain from a CA answering garbage succeeded, the directory known")
	}
	if n := ca.Orders(); n != 1 {
		t.Errorf("Orders() = %d, want still 1", n)
	}
}

// A name the DNS server does not resolve fails validation: Pebble's
// answer is an error, and the orders it made are counted.
func TestUnresolvedName(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: port})
	c := newClient(t, ca, certmagic.ACMEIssuer{AltHTTPPort: port, DisableTLSALPNChallenge: true})

	const name = "nowhere.relay.test"
	ca.SetAddrs(name)
	err := c.obtain(t, name)
	if err == nil {
		t.Fatal("obtain for a name that does not resolve succeeded")
	}
	t.Logf("obtain: %v", err)
	// acmez makes one order, fails its only challenge type, and has
	// nothing else to try.
	if n, m := ca.OrdersFor(name), ca.Issued(); n != 1 || m != 0 {
		t.Errorf("OrdersFor, Issued = %d, %d, want 1, 0", n, m)
	}

	ca.SetAddrs(name, netip.MustParseAddr("127.0.0.1"))
	if err := c.obtain(t, name); err != nil {
		t.Fatalf("obtain once the name resolves: %v", err)
	}
	if n, m := ca.OrdersFor(name), ca.Issued(); n != 2 || m != 1 {
		t.Errorf("OrdersFor, Issued = %d, %d, want 2, 1", n, m)
	}
}

func TestDNS(t *testing.T) {
	t.Parallel()
	v6 := netip.MustParseAddr("::1")
	ca := pebbletest.Start(t, pebbletest.Options{Resolve: func(name string) []netip.Addr {
		switch name {
		case "six.relay.test":
			return []netip.Addr{v6}
		case "gone.relay.test":
			return nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	}})
	ca.SetAddrs("Over.Relay.Test.", netip.MustParseAddr("127.0.0.3"))

	for _, network := range []string{"udp", "tcp"} {
		ask := func(name string, qtype uint16) *dns.Msg {
			t.Helper()
			m := new(dns.Msg)
			m.SetQuestion(dns.Fqdn(name), qtype)
			cl := &dns.Client{Net: network, Timeout: 5 * time.Second}
			in, _, err := cl.Exchange(m, ca.DNSAddr())
			if err != nil {
				t.Fatalf("%s %s: %v", network, name, err)
			}
			return in
		}
		a := func(name string) string {
			t.Helper()
			in := ask(name, dns.TypeA)
			if in.Rcode != dns.RcodeSuccess {
				return dns.RcodeToString[in.Rcode]
			}
			var got []string
			for _, rr := range in.Answer {
				got = append(got, rr.(*dns.A).A.String())
			}
			return strings.Join(got, ",")
		}
		if got := a("any.relay.test"); got != "127.0.0.2" {
			t.Errorf("%s: A any.relay.test = %s", network, got)
		}
		if got := a("over.relay.test"); got != "127.0.0.3" {
			t.Errorf("%s: A over.relay.test = %s, want SetAddrs' 127.0.0.3", network, got)
		}
		if got := a("gone.relay.test"); got != "NXDOMAIN" {
			t.Errorf("%s: A gone.relay.test = %s, want NXDOMAIN", network, got)
		}
		if got := a("six.relay.test"); got != "" {
			t.Errorf("%s: A six.relay.test = %q, want no records", network, got)
		}
		in := ask("six.relay.test", dns.TypeAAAA)
		if len(in.Answer) != 1 || !in.Answer[0].(*dns.AAAA).AAAA.Equal(v6.AsSlice()) {
			t.Errorf("%s: AAAA six.relay.test = %v", network, in.Answer)
		}
	}
}

func TestDirectory(t *testing.T) {
	t.Parallel()
	dir := func(opts pebbletest.Options) map[string]any {
		ca := pebbletest.Start(t, opts)
		status, body := get(t, ca, ca.DirectoryURL())
		var d map[string]any
		if status != http.StatusOK || json.Unmarshal(body, &d) != nil {
			t.Fatalf("directory: %d %q", status, body)
		}
		return d
	}
	d := dir(pebbletest.Options{})
	if _, ok := d["renewalInfo"]; !ok {
		t.Errorf("directory has no renewalInfo: %v", d)
	}
	profiles := d["meta"].(map[string]any)["profiles"].(map[string]any)
	if _, ok := profiles[pebbletest.Profile]; len(profiles) != 1 || !ok {
		t.Errorf("profiles %v, want %s alone", profiles, pebbletest.Profile)
	}
	d = dir(pebbletest.Options{NoARI: true})
	if _, ok := d["renewalInfo"]; ok {
		t.Errorf("NoARI: directory has renewalInfo: %v", d)
	}
	if _, ok := d["newOrder"]; !ok {
		t.Errorf("NoARI: directory has no newOrder: %v", d)
	}
}

func TestRootPEMFile(t *testing.T) {
	t.Parallel()
	ca := pebbletest.Start(t, pebbletest.Options{})
	b, err := os.ReadFile(ca.RootPEMFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("%s holds no certificate", ca.RootPEMFile())
	}
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get(ca.DirectoryURL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("directory: %s", resp.Status)
	}
}

// AlwaysValid passes a challenge nobody answers, and ACME Renewal
// Information is Pebble's until SetRenewalInfo says otherwise.
func TestAlwaysValidAndRenewalInfo(t *testing.T) {
	t.Parallel()
	ca := pebbletest.Start(t, pebbletest.Options{AlwaysValid: true, Validity: time.Hour})
	// Nothing listens on the port the CA's HTTPPort is; certmagic's own
	// solver listens on another.
	c := newClient(t, ca, certmagic.ACMEIssuer{AltHTTPPort: freePort(t), DisableTLSALPNChallenge: true})
	const name = "valid.relay.test"
	if err := c.obtain(t, name); err != nil {
		t.Fatalf("obtain with AlwaysValid: %v", err)
	}
	leaf := c.chain(t, name)[0]

	status, body := get(t, ca, ca.DirectoryURL())
	var dir struct{ RenewalInfo string }
	if status != http.StatusOK || json.Unmarshal(body, &dir) != nil || dir.RenewalInfo == "" {
		t.Fatalf("directory: %d %q", status, body)
	}
	id, err := acme.ARIUniqueIdentifier(leaf)
	if err != nil {
		t.Fatal(err)
	}
	url := dir.RenewalInfo + "/" + id
	status, body = get(t, ca, url)
	var ri acme.RenewalInfo
	if status != http.StatusOK || json.Unmarshal(body, &ri) != nil {
		t.Fatalf("renewal info: %d %q", status, body)
	}
	// Pebble's window for a short certificate opens at issuance.
	if !ri.SuggestedWindow.Start.Equal(leaf.NotBefore) || !ri.SuggestedWindow.End.Equal(leaf.NotAfter) {
		t.Errorf("suggested window %v .. %v, certificate %v .. %v", ri.SuggestedWindow.Start, ri.SuggestedWindow.End, leaf.NotBefore, leaf.NotAfter)
	}

	const set = `{"suggestedWindow":{"start":"2030-01-01T00:00:00Z","end":"2030-01-02T00:00:00Z"}}`
	if err := ca.SetRenewalInfo(leaf, set); err != nil {
		t.Fatal(err)
	}
	if status, body = get(t, ca, url); status != http.StatusOK || string(body) != set {
		t.Errorf("renewal info after SetRenewalInfo: %d %q", status, body)
	}
}

// get fetches url from ca's ACME server, trusting RootPool.
func get(t *testing.T, ca *pebbletest.CA, url string) (int, []byte) {
	t.Helper()
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.RootPool()}}}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}
