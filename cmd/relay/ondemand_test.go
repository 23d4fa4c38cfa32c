package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"relay/internal/pebbletest"
	"relay/internal/testcert"
)

// TestACMEOnDemand: relay, alone and with two processes, with
// acme.on_demand (allow *.shop.test, an ask URL that approves names
// starting with "ok", per_minute 2) and a tls_certificates file for
// default.relay.test:
//   - the first handshake for an allowed, approved name gets the
//     certificate ordered for it there and then, which verifies against
//     the CA's roots (one order);
//   - 1,000 handshakes for names outside the rule (random names under a
//     domain allow does not list, which the ask URL would approve; names
//     the ask URL refuses; names no CA issues for) cause no order, get the
//     file's certificate, and cost one ask call per refused name;
//   - the allowed name is still served, by every process;
//   - per_minute 2: the second new name is ordered, the third refused;
//   - after a restart, the names in storage are served without an order.
func TestACMEOnDemand(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		var askMu sync.Mutex
		asks := map[string]int{}
		ask := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name := r.URL.Query().Get("domain")
			askMu.Lock()
			asks[name]++
			askMu.Unlock()
			if !strings.HasPrefix(name, "ok") {
				http.Error(w, "not ours", http.StatusForbidden)
				return
			}
		}))
		t.Cleanup(ask.Close)
		askCalls := func() (calls int, names int) {
			askMu.Lock()
			defer askMu.Unlock()
			for _, n := range asks {
				calls += n
			}
			return calls, len(asks)
		}

		port := freePort(t)
		tlsPort, _ := strconv.Atoi(port)
		ca := pebbletest.Start(t, pebbletest.Options{TLSPort: tlsPort})
		def := testcert.NewCA(t).Server(t, testcert.ECDSA, "default.relay.test")
		be := newBackend(t, nil)
		file := writeConfig(t, fmt.Sprintf("processes: %d\ntls_listen: 127.0.0.1:%s\n", processes, port)+
			"tls_certificates:\n  - {cert_file: "+def.CertFile+", key_file: "+def.KeyFile+"}\n"+
			"acme:\n  email: ops@relay.test\n  ca: "+ca.DirectoryURL()+"\n  ca_root: "+ca.RootPEMFile()+
			"\n  storage: {dir: "+t.TempDir()+"}\n"+
			"  on_demand:\n    allow: [\"*.shop.test\"]\n    ask: "+ask.URL+"/tls-ok\n    per_minute: 2\n"+
			backendsYAML([]string{be.url}))
		r, started := startRelay(t, "", "-config", file)
		addr := net.JoinHostPort("127.0.0.1", port)
		admin := adminOf(t, started)
		acmeUp := func() {
			t.Helper()
			// The control's status carries ACME once its manager is
			// set: from then on an ask is decided, not refused.
			deadline := time.Now().Add(20 * time.Second)
			for {
				_, metrics := get(t, newClient(t), admin+"/metrics")
				if strings.Contains(metrics, "relay_acme_orders_total") {
					return
				}
				if time.Now().After(deadline) {
					t.Fatal("ACME did not start within 20 s")
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		acmeUp()
		handshake := func(name string, verify bool) (*x509.Certificate, error) {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", addr, &tls.Config{
				ServerName: name, RootCAs: ca.IssuerRoots(), NextProtos: []string{"http/1.1"}, InsecureSkipVerify: !verify,
			})
			if err != nil {
				return nil, err
			}
			defer c.Close()
			return c.ConnectionState().PeerCertificates[0], nil
		}

		start := time.Now()
		if _, err := handshake("ok-first.shop.test", true); err != nil {
			t.Fatalf("the first handshake for an allowed name: %v", err)
		}
		t.Logf("first handshake, with its order: %v", time.Since(start).Round(time.Millisecond))
		if n := ca.OrdersFor("ok-first.shop.test"); n != 1 {
			t.Errorf("the CA saw %d orders for ok-first.shop.test, want 1", n)
		}

		refusedByAsk := []string{"no1.shop.test", "no2.shop.test", "no3.shop.test", "no4.shop.test", "no5.shop.test"}
		const handshakes = 1000
		names := make(chan string, handshakes)
		for i := range handshakes {
			switch i % 4 {
			case 0, 1:
				names <- fmt.Sprintf("ok-r%d-%x.other.test", i, rand.Uint64())
			case 2:
				names <- refusedByAsk[i%len(refusedByAsk)]
			default:
				junk := []string{fmt.Sprintf("ok.b%d.shop.test", i), "shop.test", "x_y.shop.test"}
				names <- junk[(i/4)%len(junk)]
			}
		}
		close(names)
		var wg sync.WaitGroup
		var wrong, failed atomic.Int64
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for name := range names {
					leaf, err := handshake(name, false)
					if err != nil {
						failed.Add(1)
					} else if leaf.Subject.CommonName != "default.relay.test" {
						wrong.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if n, m := failed.Load(), wrong.Load(); n != 0 || m != 0 {
			t.Errorf("of %d handshakes for refused names, %d failed and %d got another certificate than the file's", handshakes, n, m)
		}
		if n := ca.Orders(); n != 1 {
			t.Fatalf("after %d handshakes for names outside the rule the CA saw %d orders, want 1 (ok-first)", handshakes, n)
		}
		calls, distinct := askCalls()
		t.Logf("%d handshakes for refused names: %d ask calls for %d names", handshakes, calls, distinct)
		if calls != 1+len(refusedByAsk) || distinct != 1+len(refusedByAsk) {
			t.Errorf("the ask URL was called %d times for %d names, want once for each of %d", calls, distinct, 1+len(refusedByAsk))
		}

		for i := range 20 {
			if _, err := handshake("ok-first.shop.test", true); err != nil {
				t.Fatalf("handshake %d for the name issued on demand, after the refusals: %v", i, err)
			}
		}

		if _, err := handshake("ok-second.shop.test", true); err != nil {
			t.Fatalf("the second new name in a minute: %v", err)
		}
		leaf, err := handshake("ok-third.shop.test", false)
		if err != nil || leaf.Subject.CommonName != "default.relay.test" {
			t.Errorf("the third new name in a minute (per_minute 2): %v, %v; want the file's certificate", leaf, err)
		}
		if n := ca.Orders(); n != 2 {
			t.Errorf("the CA saw %d orders, want 2", n)
		}
		// The line may reach relay's output after the handshake ended.
		if _, ok := r.waitLog(10*time.Second, func(l logLine) bool {
			return strings.HasPrefix(l.Msg(), "no certificate on demand") && l.Str("key") == "acme.on_demand.per_minute" && l.Str("name") == "ok-third.shop.test"
		}); !ok {
			t.Errorf("no line says ok-third.shop.test was refused by acme.on_demand.per_minute")
		}
		refusals := 0
		for _, l := range r.logs() {
			if strings.HasPrefix(l.Msg(), "no certificate on demand") {
				refusals++
			}
		}
		// Each process and the control log at most 10 refusals a minute.
		if max := 10 * (processes + 1); refusals > max {
			t.Errorf("%d refusal lines, want at most %d", refusals, max)
		}
		t.Logf("%d refusal lines logged", refusals)

		r.stop()
		r, started = startRelay(t, "", "-config", file)
		admin = adminOf(t, started)
		acmeUp()
		for _, name := range []string{"ok-first.shop.test", "ok-second.shop.test"} {
			if _, err := handshake(name, true); err != nil {
				t.Errorf("after a restart, %s from storage: %v", name, err)
			}
		}
		if n := ca.Orders(); n != 2 {
			t.Errorf("after a restart the CA saw %d orders, want still 2", n)
		}
	})
}
