package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"relay/internal/certstore"
	"relay/internal/etcdtest"
	"relay/internal/pebbletest"
	"relay/internal/redistest"
)

// answerer stands where relay's doors stand: an HTTP listener and a TLS
// listener on the ports the CA validates, answering every challenge
// from storage alone (what an instance that did not start the order
// has), through the manager's stored lookup.
type answerer struct {
	m                 *Manager
	httpPort, tlsPort int
	answered          sync.Map // host -> challenge type answered
}

func startAnswerer(t *testing.T) *answerer {
	t.Helper()
	a := &answerer{}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.httpPort, a.tlsPort = hl.Addr().(*net.TCPAddr).Port, tl.Addr().(*net.TCPAddr).Port
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.URL.Path, "/.well-known/acme-challenge/")
		host, _, _ := strings.Cut(r.Host, ":")
		if !ok || a.m == nil {
			http.NotFound(w, r)
			return
		}
		c, found, err := a.m.stored(r.Context(), host)
		body, match := c.HTTP01Answer(token)
		if err != nil || !found || !match {
			http.NotFound(w, r)
			return
		}
		a.answered.Store(host, "http-01")
		w.Write([]byte(body))
	})}
	go hs.Serve(hl)
	t.Cleanup(func() { hs.Close() })
	tc := &tls.Config{
		NextProtos: []string{"acme-tls/1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if a.m == nil {
				return nil, errors.New("no manager")
			}
			c, found, err := a.m.stored(hello.Context(), hello.ServerName)
			if err != nil || !found {
				return nil, errors.New("no challenge for " + hello.ServerName)
			}
			a.answered.Store(hello.ServerName, "tls-alpn-01")
			return c.TLSALPN01Certificate()
		},
	}
	tlsLn := tls.NewListener(tl, tc)
	go func() {
		for {
			c, err := tlsLn.Accept()
			if err != nil {
				return
			}
			go func() {
				c.SetDeadline(time.Now().Add(5 * time.Second))
				c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() { tlsLn.Close() })
	return a
}

func settings(ca *pebbletest.CA, a *answerer, st certmagic.Storage, names ...string) Settings {
	return Settings{
		CA: ca.DirectoryURL(), Roots: ca.RootPool(), Email: "ops@relay.test",
		Names: names, HTTP01: true, TLSALPN01: true,
		ListenHost: "127.0.0.1", HTTPPort: a.httpPort, TLSPort: a.tlsPort,
		Storage: st, CheckInterval: time.Second,
	}
}

// published gathers what managers publish, by first name.
type published struct {
	mu  sync.Mutex
	got map[string][]Issued
	ch  chan struct{}
}

func newPublished() *published {
	return &published{got: map[string][]Issued{}, ch: make(chan struct{}, 1024)}
}

func (p *published) add(is Issued) {
	p.mu.Lock()
	p.got[is.Names[0]] = append(p.got[is.Names[0]], is)
	p.mu.Unlock()
	p.ch <- struct{}{}
}

// wait returns once cond holds of what was published, or fails.
func (p *published) wait(t *testing.T, what string, cond func(map[string][]Issued) bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		p.mu.Lock()
		ok := cond(p.got)
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-p.ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func verify(t *testing.T, ca *pebbletest.CA, is Issued, name string) *x509.Certificate {
	t.Helper()
	pair, err := is.Pair()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	inter := x509.NewCertPool()
	for _, der := range pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: ca.IssuerRoots(), Intermediates: inter}); err != nil {
		t.Fatalf("certificate for %s does not verify: %v", name, err)
	}
	return leaf
}

func startManager(t *testing.T, a *answerer, s Settings, p *published) *Manager {
	t.Helper()
	return startLogging(t, a, s, p, nil)
}

// startLogging is startManager with the manager's log lines in buf,
// as JSON; a nil buf discards them.
func startLogging(t *testing.T, a *answerer, s Settings, p *published, buf *syncBuffer) *Manager {
	t.Helper()
	var log *slog.Logger
	if buf != nil {
		log = slog.New(slog.NewJSONHandler(buf, nil))
	}
	m, err := New(s, p.add, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	a.m = m
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestIssuesByEachChallenge(t *testing.T) {
	for _, chal := range []string{"http-01", "tls-alpn-01"} {
		t.Run(chal, func(t *testing.T) {
			a := startAnswerer(t)
			ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: a.httpPort, TLSPort: a.tlsPort})
			s := settings(ca, a, &certmagic.FileStorage{Path: t.TempDir()}, "one.relay.test", "two.relay.test")
			s.HTTP01, s.TLSALPN01 = chal == "http-01", chal == "tls-alpn-01"
			p := newPublished()
			m := startManager(t, a, s, p)
			p.wait(t, "two certificates", func(g map[string][]Issued) bool { return len(g) == 2 })
			for _, name := range s.Names {
				verify(t, ca, p.got[name][0], name)
				if got, _ := a.answered.Load(name); got != chal {
					t.Errorf("%s was validated by %v, want %s", name, got, chal)
				}
			}
			if n := ca.Orders(); n != 2 {
				t.Errorf("the CA saw %d orders, want 2", n)
			}
			c := m.Counts()
			if c.Orders != 2 || c.Obtained != 2 || c.Failures != 0 {
				t.Errorf("counts %+v, want 2 orders, 2 obtained, no failure", c)
			}
		})
	}
}

// TestRenewsBeforeExpiry: certificates that live 12 s are renewed at two
// thirds of their life, and the new one is published while the old one
// is still valid.
func TestRenewsBeforeExpiry(t *testing.T) {
	a := startAnswerer(t)
	ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: a.httpPort, TLSPort: a.tlsPort, Validity: 12 * time.Second})
	p := newPublished()
	s := settings(ca, a, &certmagic.FileStorage{Path: t.TempDir()}, "renew.relay.test")
	startManager(t, a, s, p)
	p.wait(t, "a renewal", func(g map[string][]Issued) bool { return len(g["renew.relay.test"]) >= 2 })
	first, second := p.got["renew.relay.test"][0], p.got["renew.relay.test"][1]
	if !second.NotAfter.After(first.NotAfter) {
		t.Errorf("the renewal ends %v, not after the first's %v", second.NotAfter, first.NotAfter)
	}
	if time.Now().After(first.NotAfter) {
		t.Errorf("the renewal came after the first certificate expired (%v)", first.NotAfter)
	}
	verify(t, ca, second, "renew.relay.test")
}

// TestSharedStorageOrdersEachNameOnce: three managers, sharing one
// storage, start cold with five names; the CA sees exactly five orders
// and every manager publishes all five certificates. The CA validates
// through a listener that answers from storage alone.
func TestSharedStorageOrdersEachNameOnce(t *testing.T) {
	names := []string{"a.relay.test", "b.relay.test", "c.relay.test", "d.relay.test", "e.relay.test"}
	stores := map[string]func(t *testing.T) func() certmagic.Storage{
		"etcd": func(t *testing.T) func() certmagic.Storage {
			srv := etcdtest.Start(t)
			return func() certmagic.Storage {
				return certstore.NewEtcd(srv.Client(), certstore.EtcdOptions{Lease: 2 * time.Second})
			}
		},
		"redis": func(t *testing.T) func() certmagic.Storage {
			rs := redistest.Start(t)
			return func() certmagic.Storage {
				return certstore.NewRedis(rs.Client(), certstore.RedisOptions{Lease: 2 * time.Second})
			}
		},
	}
	for kind, open := range stores {
		t.Run(kind, func(t *testing.T) {
			storage := open(t)
			a := startAnswerer(t)
			ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: a.httpPort, TLSPort: a.tlsPort})
			ps := make([]*published, 3)
			ms := make([]*Manager, 3)
			var wg sync.WaitGroup
			for i := range ms {
				ps[i] = newPublished()
				m, err := New(settings(ca, a, storage(), names...), ps[i].add, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(m.Stop)
				ms[i] = m
			}
			a.m = ms[0]
			for _, m := range ms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := m.Start(); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			for i, p := range ps {
				p.wait(t, "manager "+strconv.Itoa(i)+"'s five certificates", func(g map[string][]Issued) bool { return len(g) == len(names) })
			}
			if n := ca.Orders(); n != len(names) {
				t.Errorf("the CA saw %d orders for %d names", n, len(names))
			}
			var orders uint64
			for i, m := range ms {
				orders += m.Counts().Orders
				for _, name := range names {
					verify(t, ca, ps[i].got[name][0], name)
				}
			}
			if orders != uint64(len(names)) {
				t.Errorf("the managers began %d orders together, want %d", orders, len(names))
			}
		})
	}
}

// TestStorageValueNotACertificate: a value in storage that is not a
// certificate is an error naming the key, and nothing is published.
func TestStorageValueNotACertificate(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	ctx := context.Background()
	st.Store(ctx, "certificates/x/bad/bad.crt", []byte("not a certificate"))
	st.Store(ctx, "certificates/x/bad/bad.key", []byte("not a key"))
	m := &Manager{s: Settings{Storage: st}}
	_, err := m.load(ctx, "certificates/x/bad/bad.crt", "certificates/x/bad/bad.key")
	if err == nil || !strings.Contains(err.Error(), "not a certificate") {
		t.Fatalf("err = %v, want one saying the value is not a certificate", err)
	}
	_, err = m.load(ctx, "certificates/x/missing.crt", "certificates/x/missing.key")
	if err == nil || !strings.Contains(err.Error(), "certificates/x/missing.crt") {
		t.Fatalf("err = %v, want one naming the missing key", err)
	}
}

// TestCAAnsweringGarbage: a CA whose directory answers with what is not
// JSON fails the order with one log line naming the name, and counts a
// failure; nothing is published.
func TestCAAnsweringGarbage(t *testing.T) {
	a := startAnswerer(t)
	ca := pebbletest.Start(t, pebbletest.Options{TLSPort: a.tlsPort})
	ca.Garbage(true)
	var buf syncBuffer
	p := newPublished()
	s := settings(ca, a, &certmagic.FileStorage{Path: t.TempDir()}, "garbage.relay.test")
	s.HTTP01 = false
	m := startLogging(t, a, s, p, &buf)
	deadline := time.Now().Add(20 * time.Second)
	for m.Counts().Failures == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no failure counted; log: %s", buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	line := buf.String()
	if !strings.Contains(line, `"msg":"ACME order failed"`) || !strings.Contains(line, `"name":"garbage.relay.test"`) {
		t.Errorf("log %q lacks the failure's line naming the name", line)
	}
	if len(m.Held()) != 0 || ca.Orders() != 0 {
		t.Errorf("held %d certificates, the CA saw %d orders", len(m.Held()), ca.Orders())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
