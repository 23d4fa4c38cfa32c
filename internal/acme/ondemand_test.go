package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"relay/internal/pebbletest"
	"relay/internal/tlsconf"
)

// askServer is an on_demand.ask service: it approves the names that
// start with "ok" and refuses every other, counting the calls by name.
type askServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func startAskServer(t *testing.T) *askServer {
	a := &askServer{calls: map[string]int{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("domain")
		a.mu.Lock()
		a.calls[name]++
		a.mu.Unlock()
		if !strings.HasPrefix(name, "ok") || r.URL.Query().Get("from") != "relay" {
			http.Error(w, "not one of ours", http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(a.Close)
	return a
}

// url is the ask URL, with a query of its own that relay keeps.
func (a *askServer) url() string { return a.URL + "/tls-ok?from=relay" }

func (a *askServer) total() (calls, names int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.calls {
		calls += n
	}
	return calls, len(a.calls)
}

// demandRig is one relay instance as far as on demand goes, without the
// channel: a manager, the process side (Serving and Demand) that asks
// it, and a TLS listener serving through tlsconf on the port the CA
// validates, which answers its TLS-ALPN-01 handshakes too. Publishing
// puts a certificate into the process side before the manager answers,
// as the control's channel does.
type demandRig struct {
	ca      *pebbletest.CA
	m       *Manager
	serving *Serving
	demand  *Demand
	addr    string
	asked   atomic.Int64 // asks the process side sent to the manager
	askedMu sync.Mutex
	hosts   map[string]int // the names asked about
	log     *syncBuffer
	p       *published
	stop    func() // stops the manager, once
}

// listenTLS is a listener for a rig, and its port, made before the CA
// that is told the port.
func listenTLS(t *testing.T) (net.Listener, int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, ln.Addr().(*net.TCPAddr).Port
}

func startDemandRig(t *testing.T, ca *pebbletest.CA, ln net.Listener, st certmagic.Storage, od *OnDemand) *demandRig {
	t.Helper()
	port := ln.Addr().(*net.TCPAddr).Port
	r := &demandRig{ca: ca, addr: ln.Addr().String(), log: &syncBuffer{}, p: newPublished(), hosts: map[string]int{}}
	logger := slog.New(slog.NewJSONHandler(r.log, nil))
	r.serving = NewServing(nil, func(id uint64, host string) error {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			c, found, err := r.m.Challenge(ctx, host)
			var data []byte
			if found && err == nil {
				data, err = json.Marshal(c.Challenge)
			}
			r.serving.Answer(id, found && err == nil, data)
		}()
		return nil
	})
	s := Settings{
		CA: ca.DirectoryURL(), Roots: ca.RootPool(), Email: "ops@relay.test", TLSALPN01: true,
		ListenHost: "127.0.0.1", TLSPort: port, Storage: st, CheckInterval: time.Second, OnDemand: od,
	}
	m, err := New(s, func(is Issued) {
		if err := r.serving.Put(is); err != nil {
			t.Error(err)
		}
		r.p.add(is)
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	r.m = m
	r.stop = sync.OnceFunc(m.Stop)
	t.Cleanup(r.stop)
	r.demand = NewDemand(r.serving, od.Allow, 0, func(id uint64, host string) error {
		r.asked.Add(1)
		r.askedMu.Lock()
		r.hosts[host]++
		r.askedMu.Unlock()
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), DemandWait)
			defer cancel()
			err := m.OnDemand(ctx, host)
			reason := ""
			if err != nil {
				reason = err.Error()
			}
			r.demand.Answer(id, err == nil, reason)
		}()
		return nil
	}, logger)
	srv, err := tlsconf.NewManagedServer(nil, "1.2", r.serving)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetOnDemand(r.demand.Certificate)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c.SetDeadline(time.Now().Add(30 * time.Second))
				tc := tls.Server(c, srv.Config())
				tc.Handshake()
				tc.Close()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

// handshake makes one TLS handshake for name and returns the leaf it
// got, verified for name against the CA's roots.
func (r *demandRig) handshake(name string) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", r.addr, &tls.Config{
		ServerName: name, RootCAs: r.ca.IssuerRoots(), NextProtos: []string{"http/1.1"},
	})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// lines counts the log lines holding s.
func (r *demandRig) lines(s string) int { return strings.Count(r.log.String(), s) }

// TestOnDemandIssuesAtFirstHandshake: the first handshake for an
// allowed name the ask URL approves gets the certificate ordered for
// it, which verifies against the CA's roots; 16 handshakes at once for
// another new name share one decision, one ask and one order; and a
// later handshake is served from what the process holds, without asking.
func TestOnDemandIssuesAtFirstHandshake(t *testing.T) {
	ask := startAskServer(t)
	ln, port := listenTLS(t)
	ca := pebbletest.Start(t, pebbletest.Options{TLSPort: port})
	r := startDemandRig(t, ca, ln, &certmagic.FileStorage{Path: t.TempDir()},
		&OnDemand{Allow: []string{"*.shop.test"}, Ask: ask.url(), PerMinute: 10})

	start := time.Now()
	leaf, err := r.handshake("ok-first.shop.test")
	if err != nil {
		t.Fatalf("the first handshake for an allowed name: %v", err)
	}
	t.Logf("first handshake with an order on demand: %v", time.Since(start).Round(time.Millisecond))
	if !strings.EqualFold(leaf.DNSNames[0], "ok-first.shop.test") || len(leaf.DNSNames) != 1 {
		t.Errorf("the first handshake got a certificate for %v", leaf.DNSNames)
	}
	if n := ca.OrdersFor("ok-first.shop.test"); n != 1 {
		t.Errorf("the CA saw %d orders for ok-first.shop.test, want 1", n)
	}
	if calls, _ := ask.total(); calls != 1 {
		t.Errorf("the ask URL was called %d times, want 1", calls)
	}

	const together = 16
	var wg sync.WaitGroup
	errs := make(chan error, together)
	for range together {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.handshake("ok-together.shop.test"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a handshake among %d at once: %v", together, err)
	}
	if n := ca.OrdersFor("ok-together.shop.test"); n != 1 {
		t.Errorf("%d handshakes at once for one new name: %d orders, want 1", together, n)
	}
	ask.mu.Lock()
	if n := ask.calls["ok-together.shop.test"]; n != 1 {
		t.Errorf("%d handshakes at once for one new name: %d asks, want 1", together, n)
	}
	ask.mu.Unlock()

	asked := r.asked.Load()
	for range 20 {
		if _, err := r.handshake("ok-first.shop.test"); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.asked.Load() - asked; n != 0 {
		t.Errorf("20 handshakes for a name in hand sent %d asks to the control, want 0", n)
	}
	if n := ca.Orders(); n != 2 {
		t.Errorf("the CA saw %d orders, want 2", n)
	}
	if c := r.m.Counts(); c.Orders != 2 || c.Obtained != 2 || c.Failures != 0 {
		t.Errorf("counts %+v, want 2 orders, 2 obtained", c)
	}
	if n := r.lines(`"msg":"ACME certificate on demand"`); n != 2 {
		t.Errorf("%d lines for certificates on demand, want 2; log: %s", n, r.log.String())
	}
}

// TestOnDemandRefusesNamesOutsideTheRule: 1,000 handshakes for names
// outside the rule (random names under a domain allow does not list,
// which the ask URL would approve; names the ask URL refuses; names no
// CA issues for) cause no order; the
// process asks the manager only about names allow admits, the ask URL
// is called once per refused name (its answers are kept), the manager
// refuses names outside allow on its own too, the refusals are logged
// within their bounds, and an allowed name is issued afterwards.
func TestOnDemandRefusesNamesOutsideTheRule(t *testing.T) {
	ask := startAskServer(t)
	ln, port := listenTLS(t)
	ca := pebbletest.Start(t, pebbletest.Options{TLSPort: port})
	r := startDemandRig(t, ca, ln, &certmagic.FileStorage{Path: t.TempDir()},
		&OnDemand{Allow: []string{"*.shop.test", "exact.test"}, Ask: ask.url(), PerMinute: 10})

	refusedByAsk := []string{"no1.shop.test", "no2.shop.test", "no3.shop.test", "no4.shop.test", "no5.shop.test"}
	const handshakes = 1000
	names := make(chan string, handshakes)
	admitted := 0
	for i := range handshakes {
		switch i % 4 {
		case 0, 1:
			// The ask URL would approve these: allow alone
			// keeps them from an order.
			names <- fmt.Sprintf("ok-r%d-%x.other.test", i, rand.Uint64())
		case 2:
			names <- refusedByAsk[i%len(refusedByAsk)]
			admitted++
		default:
			// Under an allowed domain but more than one label deep,
			// the domain itself, an address, junk: never a name to
			// order.
			junk := []string{fmt.Sprintf("a.b%d.shop.test", i), "shop.test", "127.0.0.1", "x_y.shop.test"}
			names <- junk[(i/4)%len(junk)]
		}
	}
	close(names)
	var wg sync.WaitGroup
	var served atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				if _, err := r.handshake(name); err == nil {
					served.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := served.Load(); n != 0 {
		t.Errorf("%d of %d handshakes for refused names got a certificate that verifies", n, handshakes)
	}
	if n := ca.Orders(); n != 0 {
		t.Fatalf("%d handshakes for names outside the rule: the CA saw %d orders, want 0", handshakes, n)
	}
	// Handshakes for a name whose ask is in flight wait for its answer
	// instead of asking again, so a name may be asked about fewer times
	// than it came.
	r.askedMu.Lock()
	for host, n := range r.hosts {
		if !slices.Contains(refusedByAsk, host) {
			t.Errorf("the process asked the manager %d times about %s, which allow does not admit", n, host)
		}
	}
	r.askedMu.Unlock()
	if n := r.asked.Load(); n == 0 || n > int64(admitted) {
		t.Errorf("the process asked the manager %d times, want 1 to %d", n, admitted)
	}
	calls, distinct := ask.total()
	t.Logf("%d handshakes: %d asks to the manager, %d calls of the ask URL for %d names", handshakes, r.asked.Load(), calls, distinct)
	if calls != len(refusedByAsk) || distinct != len(refusedByAsk) {
		t.Errorf("the ask URL was called %d times for %d names, want once for each of %d", calls, distinct, len(refusedByAsk))
	}

	// The manager judges allow itself, whatever a process sends.
	for i := range 200 {
		err := r.m.OnDemand(context.Background(), fmt.Sprintf("ok-direct%d.other.test", i))
		var refused *Refused
		if !errors.As(err, &refused) || refused.Key != "acme.on_demand.allow" {
			t.Fatalf("the manager asked directly for a name outside allow: %v", err)
		}
	}
	if n := ca.Orders(); n != 0 {
		t.Fatalf("200 asks to the manager outside allow: %d orders", n)
	}
	if calls2, _ := ask.total(); calls2 != calls {
		t.Errorf("names outside allow reached the ask URL: %d calls, was %d", calls2, calls)
	}

	log := r.log.String()
	for _, want := range []string{`"key":"acme.on_demand.allow"`, `"key":"acme.on_demand.ask"`, `403 Forbidden`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s", want)
		}
	}
	// Two places log refusals (the process side and the manager), each
	// at most 10 lines a minute.
	if n := r.lines(`"msg":"no certificate on demand`); n > 2*refusalLines {
		t.Errorf("%d refusal lines for %d handshakes, want at most %d", n, handshakes, 2*refusalLines)
	}

	if _, err := r.handshake("ok-after.shop.test"); err != nil {
		t.Fatalf("an allowed name after the refusals: %v", err)
	}
	if _, err := r.handshake("ok.exact.test"); err == nil {
		t.Errorf("ok.exact.test got a certificate; allow lists exact.test, not its children")
	}
	if n, m := ca.Orders(), ca.OrdersFor("ok-after.shop.test"); n != 1 || m != 1 {
		t.Errorf("the CA saw %d orders, %d for ok-after.shop.test; want 1", n, m)
	}
}

// TestOnDemandPerMinute: with per_minute 2, the first handshakes for two
// new names get their certificates and the third new name is refused
// (its handshake fails: no tls_certificates file to fall back on), with a
// line naming acme.on_demand.per_minute; the CA sees 2 orders. A name in
// hand is still served.
func TestOnDemandPerMinute(t *testing.T) {
	ln, port := listenTLS(t)
	ca := pebbletest.Start(t, pebbletest.Options{TLSPort: port})
	r := startDemandRig(t, ca, ln, &certmagic.FileStorage{Path: t.TempDir()},
		&OnDemand{Allow: []string{"*.cap.test"}, PerMinute: 2})
	for _, name := range []string{"one.cap.test", "two.cap.test"} {
		if _, err := r.handshake(name); err != nil {
			t.Fatalf("%s, within the cap: %v", name, err)
		}
	}
	_, err := r.handshake("three.cap.test")
	if err == nil {
		t.Fatal("the third new name in a minute got a certificate; per_minute is 2")
	}
	t.Logf("third name: %v", err)
	if n := ca.Orders(); n != 2 {
		t.Errorf("the CA saw %d orders, want 2", n)
	}
	if !strings.Contains(r.log.String(), `"key":"acme.on_demand.per_minute"`) {
		t.Errorf("no line names acme.on_demand.per_minute; log: %s", r.log.String())
	}
	if _, err := r.handshake("one.cap.test"); err != nil {
		t.Errorf("a name in hand, past the cap: %v", err)
	}
}

// TestOnDemandFromStorageAfterRestart: a name obtained on demand is in
// storage; a manager started afresh over the same storage (relay
// restarted, or another instance sharing it) serves it at its first
// handshake by loading it, without an order, and without counting it
// against per_minute (1 here, spent by the first instance's order).
func TestOnDemandFromStorageAfterRestart(t *testing.T) {
	ask := startAskServer(t)
	st := &certmagic.FileStorage{Path: t.TempDir()}
	od := &OnDemand{Allow: []string{"*.shop.test"}, Ask: ask.url(), PerMinute: 1}
	ln, port := listenTLS(t)
	ca := pebbletest.Start(t, pebbletest.Options{TLSPort: port})
	first := startDemandRig(t, ca, ln, st, od)
	leaf1, err := first.handshake("ok-kept.shop.test")
	if err != nil {
		t.Fatal(err)
	}
	first.stop()
	ln.Close()

	ln2, _ := listenTLS(t)
	second := startDemandRig(t, ca, ln2, st, od)
	leaf2, err := second.handshake("ok-kept.shop.test")
	if err != nil {
		t.Fatalf("after a restart, the name in storage: %v", err)
	}
	if leaf2.SerialNumber.Cmp(leaf1.SerialNumber) != 0 {
		t.Errorf("after a restart a new certificate was served, not the one in storage")
	}
	if n := ca.OrdersFor("ok-kept.shop.test"); n != 1 {
		t.Errorf("the CA saw %d orders for ok-kept.shop.test, want 1", n)
	}
	if c := second.m.Counts(); c.Orders != 0 {
		t.Errorf("the restarted manager began %d orders, want 0", c.Orders)
	}
	if !strings.Contains(second.log.String(), `"from_storage":true`) {
		t.Errorf("no line says the certificate came from storage; log: %s", second.log.String())
	}
}

// TestOnDemandRenews: a certificate obtained on demand that lives 12 s
// is renewed at two thirds of its life, as the names of domains are, and
// handshakes get the renewed one before the first expires.
func TestOnDemandRenews(t *testing.T) {
	ln, port := listenTLS(t)
	ca := pebbletest.Start(t, pebbletest.Options{TLSPort: port, Validity: 12 * time.Second})
	r := startDemandRig(t, ca, ln, &certmagic.FileStorage{Path: t.TempDir()},
		&OnDemand{Allow: []string{"renew.demand.test"}, PerMinute: 1})
	first, err := r.handshake("renew.demand.test")
	if err != nil {
		t.Fatal(err)
	}
	r.p.wait(t, "a renewal", func(g map[string][]Issued) bool { return len(g["renew.demand.test"]) >= 2 })
	leaf, err := r.handshake("renew.demand.test")
	if err != nil {
		t.Fatal(err)
	}
	if leaf.SerialNumber.Cmp(first.SerialNumber) == 0 || !leaf.NotAfter.After(first.NotAfter) {
		t.Errorf("after the renewal a handshake got serial %v ending %v; the first was %v ending %v", leaf.SerialNumber, leaf.NotAfter, first.SerialNumber, first.NotAfter)
	}
	if time.Now().After(first.NotAfter) {
		t.Errorf("the renewal came after the first certificate expired")
	}
}
