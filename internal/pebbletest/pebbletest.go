// Package pebbletest runs Let's Encrypt's test ACME CA, Pebble, inside a
// test, on loopback, for the tests of relay's ACME certificates. Pebble's
// own packages (ca, db, va, wfe) are wired together in the test process:
// nothing is installed and nothing leaves 127.0.0.1. It is imported by
// tests only.
//
// The CA is set up to be predictable: its validation authority does not
// sleep before validating, its front end rejects no good nonces, every
// order gets the one profile (Profile), and the names it validates are
// resolved by a DNS server of the test's own (Options.Resolve, SetAddrs).
package pebbletest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/core"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"

	"relay/internal/testaddr"
	"relay/internal/testcert"
)

// Profile is the name of the CA's one certificate profile. Every order
// gets it: one that names no profile, as certmagic's do unless told, and
// one that names this one.
const Profile = "default"

// Options configure a CA. The zero value is a CA whose challenges all
// fail (there is nowhere to validate them) and whose certificates last
// Pebble's default of 90 days.
type Options struct {
	// HTTPPort is the port of 127.0.0.1 (or of what the name resolves
	// to) where the CA's validation authority asks for HTTP-01 challenge
	// responses: relay's HTTP listener, or the AltHTTPPort of a
	// certmagic ACMEIssuer. Zero is a port where connections are
	// refused, so HTTP-01 challenges fail at once. Pebble validates
	// every challenge three times at once, as from three vantage
	// points: a listener sees three requests (or, for TLS-ALPN-01,
	// three handshakes) per challenge.
	HTTPPort int
	// TLSPort is the same for TLS-ALPN-01: relay's TLS listener, or the
	// AltTLSALPNPort of a certmagic ACMEIssuer. Zero is a port where
	// connections are refused.
	TLSPort int
	// Validity is the lifetime of the certificates the CA issues, in
	// whole seconds (a fraction of a second is rounded up); zero is
	// Pebble's default of 90 days. Pebble counts the last second in:
	// NotAfter is NotBefore + Validity - 1s. NotBefore is the moment of
	// issuance, not backdated.
	Validity time.Duration
	// Resolve gives the addresses of name (lower case, without the
	// trailing dot) to the CA's validation authority; an empty answer is
	// NXDOMAIN. It is called from the DNS server's goroutines. Nil
	// resolves every name to 127.0.0.1. SetAddrs overrides it name by
	// name. The validation authority asks for AAAA before A and
	// connects to the first address it got, so an IPv6 address wins.
	Resolve func(name string) []netip.Addr
	// AlwaysValid makes the validation authority pass every challenge
	// without making any request (Pebble's PEBBLE_VA_ALWAYS_VALID), for
	// tests that want certificates and do not care how they are won.
	AlwaysValid bool
	// NoARI leaves ACME Renewal Information out of the directory, and
	// answers its requests 404, so that clients fall back to renewing
	// by the certificate's lifetime alone. By default ARI is on, as at
	// Let's Encrypt; note that Pebble's suggested renewal window for a
	// certificate shorter than about three days opens at issuance.
	NoARI bool
	// Log receives Pebble's log. Nil discards it.
	Log io.Writer
}

// CA is a Pebble instance of one test: its ACME server on a port of
// 127.0.0.1 (DirectoryURL), its DNS server, and its in-memory database.
type CA struct {
	t     testing.TB
	opts  Options
	addr  string // 127.0.0.1:PORT of the ACME server, kept across Stop and Restart
	tls   tls.Certificate
	https *testcert.CA // signs the ACME server's own certificate
	dns   *resolver

	pca *ca.CAImpl
	db  *db.MemoryStore
	wfe http.Handler

	garbage  atomic.Bool
	requests atomic.Int64

	holdMu  sync.Mutex
	holds   map[string]chan struct{} // by name: closed on release
	holding int                      // finalize requests waiting now

	// mu serializes the front end's requests and the harness's reads of
	// the database: Pebble writes some fields of its orders without
	// their lock, which is safe only if no two requests run at once.
	mu     sync.Mutex
	orders []*core.Order // every order the database stored, in order of creation

	srvMu sync.Mutex
	srv   *http.Server
	done  chan struct{} // closed when srv has stopped serving
}

// Start runs a CA until t ends.
func Start(t testing.TB, opts Options) *CA {
	t.Helper()
	if opts.Validity < 0 {
		t.Fatalf("pebbletest: negative Validity %v", opts.Validity)
	}
	c := &CA{t: t, opts: opts, https: testcert.NewCA(t)}
	c.tls = c.https.Server(t, testcert.ECDSA, "127.0.0.1", "localhost").TLS
	c.dns = startResolver(t, opts.Resolve)

	httpPort, tlsPort := opts.HTTPPort, opts.TLSPort
	if httpPort == 0 {
		httpPort = refusedPort(t)
	}
	if tlsPort == 0 {
		tlsPort = refusedPort(t)
	}

	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	logger := log.New(logw, "pebble ", log.LstdFlags|log.Lmicroseconds)

	validity := uint64((opts.Validity + time.Second - 1) / time.Second) // zero: Pebble's default
	profiles := map[string]ca.Profile{
		Profile: {Description: "relay's tests", ValidityPeriod: validity},
	}
	alwaysValid := "0"
	if opts.AlwaysValid {
		alwaysValid = "1"
	}
	// Pebble reads these from the environment when va.New and wfe.New
	// run, and only then.
	withEnv(map[string]string{
		"PEBBLE_VA_NOSLEEP":      "1",
		"PEBBLE_VA_ALWAYS_VALID": alwaysValid,
		"PEBBLE_WFE_NONCEREJECT": "0",
		// 100 is the only deterministic value: reuse a valid
		// authorization of the same account whenever there is one
		// (below 100, Pebble draws at random for each name).
		"PEBBLE_AUTHZREUSE": "100",
	}, func() {
		c.db = db.NewMemoryStore()
		// ECDSA: an RSA root and intermediate cost a test more than a
		// second under the race detector.
		c.pca = ca.New(logger, c.db, "", "ecdsa", 0, 1, profiles)
		v := va.New(logger, httpPort, tlsPort, false, c.dns.addr, c.db)
		w := wfe.New(logger, c.db, v, c.pca, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
		c.wfe = w.Handler()
	})

	var ln net.Listener
	for range 20 {
		// A port from below the ephemeral range, so that while the CA is
		// stopped no outgoing connection can be handed it.
		addr := "127.0.0.1:" + testaddr.FreePort(t)
		var err error
		if ln, err = net.Listen("tcp", addr); err == nil {
			c.addr = addr
			break
		}
	}
	if ln == nil {
		t.Fatal("pebbletest: no port for the ACME server")
	}
	c.serve(ln)
	t.Cleanup(c.Stop)
	return c
}

// refusedPort is a port of 127.0.0.1 where connections are refused.
func refusedPort(t testing.TB) int {
	addr := testaddr.Refused(t)
	p, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var envMu sync.Mutex

// withEnv runs f with vars set in the environment, and puts the
// environment back as it was after.
func withEnv(vars map[string]string, f func()) {
	envMu.Lock()
	defer envMu.Unlock()
	for k, v := range vars {
		old, had := os.LookupEnv(k)
		os.Setenv(k, v)
		if had {
			defer os.Setenv(k, old)
		} else {
			defer os.Unsetenv(k)
		}
	}
	f()
}

func (c *CA) serve(ln net.Listener) {
	srv := &http.Server{
		Handler:           c,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{c.tls}},
		ReadHeaderTimeout: 10 * time.Second,
		// Clients that give up on a handshake are the tests' business.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeTLS(ln, "", "")
	}()
	c.srv, c.done = srv, done
}

// Stop takes the ACME server down, as a crash would: its port refuses
// connections, and connections open to it are closed. The database and
// the DNS server are kept. A second Stop does nothing.
func (c *CA) Stop() {
	c.srvMu.Lock()
	defer c.srvMu.Unlock()
	if c.srv == nil {
		return
	}
	c.srv.Close()
	<-c.done
	c.srv, c.done = nil, nil
}

// Restart brings a stopped ACME server up again on the same address, with
// the same database: accounts, orders and certificates are still there.
// On a running server it does nothing.
func (c *CA) Restart() {
	c.t.Helper()
	c.srvMu.Lock()
	defer c.srvMu.Unlock()
	if c.srv != nil {
		return
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		c.t.Fatalf("pebbletest: restarting on %s: %v", c.addr, err)
	}
	c.serve(ln)
}

// Garbage makes every request to the ACME server, the directory first,
// answered 200 with a body that is not JSON (on), or answered by Pebble
// again (off). Every request, and not the directory alone, because ACME
// clients keep a directory once they have read it.
func (c *CA) Garbage(on bool) { c.garbage.Store(on) }

// renewalInfoPath is where Pebble's directory points ACME Renewal
// Information clients.
const renewalInfoPath = "/draft-ietf-acme-ari-03/renewalInfo"

// ServeHTTP serves the ACME API: Pebble's, one request at a time, unless
// Garbage or NoARI say otherwise, keeping note of the orders it creates.
func (c *CA) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.requests.Add(1)
	if !c.hold(r) {
		return
	}
	if c.garbage.Load() {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<html><body>502 Bad Gateway, or something</body></html>\n")
		return
	}
	if c.opts.NoARI && strings.HasPrefix(r.URL.Path, renewalInfoPath) {
		http.NotFound(w, r)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.opts.NoARI && r.URL.Path == wfe.DirectoryPath {
		c.directoryWithoutARI(w, r)
		return
	}
	rec := &statusWriter{ResponseWriter: w}
	c.wfe.ServeHTTP(rec, r)
	// A new order is the one 201 Created whose Location is an order's.
	if rec.status == http.StatusCreated {
		loc := w.Header().Get("Location")
		if i := strings.LastIndex(loc, "/my-order/"); i >= 0 {
			if o := c.db.GetOrderByID(loc[i+len("/my-order/"):]); o != nil {
				c.orders = append(c.orders, o)
			}
		}
	}
}

// directoryWithoutARI is Pebble's directory less its renewalInfo.
func (c *CA) directoryWithoutARI(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	c.wfe.ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	var dir map[string]json.RawMessage
	if rec.Code == http.StatusOK && json.Unmarshal(body, &dir) == nil {
		delete(dir, "renewalInfo")
		if b, err := json.MarshalIndent(dir, "", "  "); err == nil {
			body = b
		}
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	io.Copy(w, bytes.NewReader(body))
}

// statusWriter notes the status of a response.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// DirectoryURL is the ACME directory, https://127.0.0.1:PORT/dir. It stays
// the same across Stop and Restart.
func (c *CA) DirectoryURL() string { return "https://" + c.addr + wfe.DirectoryPath }

// Addr is the ACME server's 127.0.0.1:PORT.
func (c *CA) Addr() string { return c.addr }

// DNSAddr is the 127.0.0.1:PORT of the DNS server the CA's validation
// authority asks, over UDP and TCP.
func (c *CA) DNSAddr() string { return c.dns.addr }

// RootPool holds the root that signs the ACME server's own HTTPS
// certificate, for the ACME client's TrustedRoots. It does not sign
// the certificates the CA issues: see IssuerRoots.
func (c *CA) RootPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.https.Cert)
	return p
}

// RootPEMFile is RootPool's root as a PEM file, in the test's temporary
// directory.
func (c *CA) RootPEMFile() string { return c.https.File }

// IssuerRoots holds the root of the certificates the CA issues, for
// verifying what relay serves. Pebble makes it anew for every CA.
func (c *CA) IssuerRoots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.pca.GetRootCert(0).Cert)
	return p
}

// Intermediates holds the intermediate between IssuerRoots and the
// certificates the CA issues (Pebble sends it after the leaf in every
// chain it hands out).
func (c *CA) Intermediates() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.pca.GetIntermediateCert(0).Cert)
	return p
}

// SetAddrs makes name resolve to addrs for the CA's validation authority
// from now on, whatever Options.Resolve says; no addrs makes it NXDOMAIN.
func (c *CA) SetAddrs(name string, addrs ...netip.Addr) { c.dns.set(name, addrs) }

// Orders is the number of orders the CA has created (new-order requests it
// accepted), successful or not, since it started. Each is counted as the
// CA stores it, before its response is sent, so once an ACME client has an
// order the count includes it. Stop and Restart keep the count.
func (c *CA) Orders() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.orders)
}

// OrdersFor is the number of orders the CA has created that name name
// (DNS names are compared without regard to case).
func (c *CA) OrdersFor(name string) int {
	name = canonical(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, o := range c.orders {
		o.RLock()
		for _, id := range o.Identifiers {
			if strings.EqualFold(id.Value, name) {
				n++
				break
			}
		}
		o.RUnlock()
	}
	return n
}

// Issued is the number of orders for which the CA has issued a
// certificate. Pebble issues in the background once an order is
// finalized; a client that has downloaded its certificate has been
// counted.
func (c *CA) Issued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, o := range c.orders {
		o.RLock()
		if o.CertificateObject != nil {
			n++
		}
		o.RUnlock()
	}
	return n
}

// SetRenewalInfo makes the CA answer ACME Renewal Information requests
// about cert, one it issued, with response, verbatim (JSON such as
// {"suggestedWindow":{"start":"…","end":"…"}}, or anything else).
func (c *CA) SetRenewalInfo(cert *x509.Certificate, response string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.db.SetARIResponse(cert.SerialNumber, response); err != nil {
		return fmt.Errorf("pebbletest: %w", err)
	}
	return nil
}

// Requests is the number of HTTP requests the ACME server has received
// since the CA started, answered or not (Garbage and held ones too).
func (c *CA) Requests() int { return int(c.requests.Load()) }

// finalizePath is where Pebble's orders are finalized, followed by the
// order's ID.
const finalizePath = "/finalize-order/"

// HoldFinalize makes the CA hold every request to finalize an order that
// names name: the request waits unanswered, as behind a stalled CA,
// until release is called or its client goes away (a killed client's
// connection closes). An order held so is in the middle of its life:
// its authorizations are valid, no certificate is issued. Requests
// after release pass. Holding says how many wait.
func (c *CA) HoldFinalize(name string) (release func()) {
	name = canonical(name)
	ch := make(chan struct{})
	c.holdMu.Lock()
	if c.holds == nil {
		c.holds = map[string]chan struct{}{}
	}
	c.holds[name] = ch
	c.holdMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.holdMu.Lock()
			if c.holds[name] == ch {
				delete(c.holds, name)
			}
			c.holdMu.Unlock()
			close(ch)
		})
	}
}

// Holding is the number of finalize requests HoldFinalize holds now.
func (c *CA) Holding() int {
	c.holdMu.Lock()
	defer c.holdMu.Unlock()
	return c.holding
}

// hold makes r wait while HoldFinalize holds the order it finalizes, and
// reports whether r is still to be answered (false: its client left).
func (c *CA) hold(r *http.Request) bool {
	id, ok := strings.CutPrefix(r.URL.Path, finalizePath)
	if !ok {
		return true
	}
	c.holdMu.Lock()
	if len(c.holds) == 0 {
		c.holdMu.Unlock()
		return true
	}
	c.holdMu.Unlock()
	// The database has locks of its own; c.mu is not taken, so that a
	// held request stops no other.
	o := c.db.GetOrderByID(id)
	if o == nil {
		return true
	}
	var release chan struct{}
	o.RLock()
	c.holdMu.Lock()
	for _, ident := range o.Identifiers {
		if ch := c.holds[canonical(ident.Value)]; ch != nil {
			release = ch
			break
		}
	}
	if release != nil {
		c.holding++
	}
	c.holdMu.Unlock()
	o.RUnlock()
	if release == nil {
		return true
	}
	defer func() {
		c.holdMu.Lock()
		c.holding--
		c.holdMu.Unlock()
	}()
	select {
	case <-release:
		return true
	case <-r.Context().Done():
		return false
	}
}
