package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	acmeapi "github.com/mholt/acmez/v3/acme"

	"relay/internal/acme"
	"relay/internal/pebbletest"
)

// TestACMEReloadsDomains: relay, alone and with two processes, starts
// with acme.domains [a]. A reload (SIGHUP) to [a, b] orders b once, and
// every process serves it, while a keeps its certificate (same serial,
// no second order). A reload that changes acme.email is applied but for
// that key, which the log names, and nothing else changes; one with a
// duplicate name or an address in acme.domains is refused, naming the
// key, and relay serves as before. A reload (POST /reload) back to [a]
// makes b's challenges go unanswered (HTTP-01 404, TLS-ALPN-01
// handshake refused, where both were answered from the same stored
// challenges before) and b's certificate unserved in every process,
// without a new order.
func TestACMEReloadsDomains(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		port, tlsPort := freePort(t), freePort(t)
		httpN, _ := strconv.Atoi(port)
		tlsN, _ := strconv.Atoi(tlsPort)
		ca := pebbletest.Start(t, pebbletest.Options{TLSPort: tlsN, HTTPPort: httpN})
		be := newBackend(t, nil)
		storage := t.TempDir()
		file := filepath.Join(t.TempDir(), "relay.yml")
		write := func(email, domains string) {
			t.Helper()
			if err := writeFileAtomic(file, fmt.Sprintf("listen: 127.0.0.1:%s\nprocesses: %d\ntls_listen: 127.0.0.1:%s\naccess_log: false\n", port, processes, tlsPort)+
				"acme:\n  email: "+email+"\n  ca: "+ca.DirectoryURL()+"\n  ca_root: "+ca.RootPEMFile()+
				"\n  domains: ["+domains+"]\n  challenges: [tls-alpn-01, http-01]\n  storage: {dir: "+storage+"}\n"+
				"routes:\n  - name: https\n    match: {scheme: http}\n    redirect: {status: 308, scheme: https}\n"+backendsYAML([]string{be.url})); err != nil {
				t.Fatal(err)
			}
		}
		write("ops@relay.test", "a.relay.test")
		r, started := startRelay(t, "", "-config", file)
		pids := []int{r.cmd.Process.Pid}
		if processes > 1 {
			pids = childPIDs(t, r, processes)
		}
		admin := adminOf(t, started)
		tlsAddr := net.JoinHostPort("127.0.0.1", tlsPort)

		// served makes one handshake for name and says which process
		// took it, the leaf's serial, and what verifying the chain
		// against Pebble's roots for name says; proc is -1 when the
		// handshake itself failed (err says why).
		served := func(name string) (proc int, serial string, err error) {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", tlsAddr, &tls.Config{
				ServerName: name, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"},
			})
			if err != nil {
				return -1, "", err
			}
			defer c.Close()
			proc = holder(pids, tlsN, c.LocalAddr().(*net.TCPAddr).Port)
			chain := c.ConnectionState().PeerCertificates
			inter := x509.NewCertPool()
			for _, ic := range chain[1:] {
				inter.AddCert(ic)
			}
			_, err = chain[0].Verify(x509.VerifyOptions{DNSName: name, Roots: ca.IssuerRoots(), Intermediates: inter})
			return proc, chain[0].SerialNumber.String(), err
		}
		// inEvery makes handshakes for name until every process has
		// taken one that ok accepts, within 30 s; it returns the
		// serials of those.
		inEvery := func(what, name string, ok func(err error) bool) map[string]bool {
			t.Helper()
			seen, serials := map[int]bool{}, map[string]bool{}
			var last error
			for deadline := time.Now().Add(30 * time.Second); len(seen) < processes; {
				proc, serial, err := served(name)
				last = err
				switch {
				case proc >= 0 && ok(err):
					seen[proc] = true
					serials[serial] = true
				case proc < 0 && serial != "":
					t.Fatalf("%s: a handshake no process of %v holds", what, pids)
				default:
					time.Sleep(50 * time.Millisecond)
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: within 30 s only processes %v did (last: %v)", what, seen, last)
				}
			}
			return serials
		}
		verified := func(err error) bool { return err == nil }

		aSerials := inEvery("a served at start", "a.relay.test", verified)
		if len(aSerials) != 1 {
			t.Fatalf("a served with %d certificates: %v", len(aSerials), aSerials)
		}
		if _, _, err := served("b.relay.test"); err == nil {
			t.Fatal("b served before any reload lists it")
		}

		// Add b.
		write("ops@relay.test", "a.relay.test, b.relay.test")
		r.signal(syscall.SIGHUP)
		line := waitReload(t, r, 2)
		if got := strs(line["settings"]); !slices.Equal(got, []string{"acme.domains"}) {
			t.Errorf("reload line settings %q, want [acme.domains]", got)
		}
		bSerials := inEvery("b served after the reload adds it", "b.relay.test", verified)
		for i := 0; i < 10*processes; i++ {
			for name, want := range map[string]map[string]bool{"a.relay.test": aSerials, "b.relay.test": bSerials} {
				proc, serial, err := served(name)
				if err != nil || !want[serial] {
					t.Fatalf("handshake %d for %s (process %d): serial %s, err %v; want one of %v", i, name, proc, serial, err, want)
				}
			}
		}
		if a, b := ca.OrdersFor("a.relay.test"), ca.OrdersFor("b.relay.test"); a != 1 || b != 1 {
			t.Errorf("orders after adding b: a %d, b %d; want 1 and 1", a, b)
		}

		// A new email: named, not applied, nothing else changes.
		write("other@relay.test", "a.relay.test, b.relay.test")
		r.signal(syscall.SIGHUP)
		warn, ok := r.waitLog(10*time.Second, func(l logLine) bool {
			return strings.HasPrefix(l.Msg(), "reload: these settings changed but take effect only when relay restarts")
		})
		if !ok {
			t.Fatalf("no restart-only line for acme.email; log:\n%s", r.stdout.text())
		}
		if got := strs(warn["settings"]); !slices.Equal(got, []string{"acme.email"}) {
			t.Errorf("restart-only settings %q, want [acme.email]", got)
		}
		waitReload(t, r, 3)

		// Bad names: refused with the key named, generation kept.
		for i, bad := range []struct{ domains, key, msg string }{
			{"a.relay.test, b.relay.test, A.relay.test", "acme.domains[2]", "listed twice"},
			{"a.relay.test, 192.0.2.1", "acme.domains[1]", "is an address"},
		} {
			write("ops@relay.test", bad.domains)
			r.signal(syscall.SIGHUP)
			refused, ok := r.waitLog(10*time.Second, func(l logLine) bool {
				return strings.HasPrefix(l.Msg(), "reload refused") && strings.Contains(fmt.Sprint(l["problems"]), bad.key)
			})
			if !ok {
				t.Fatalf("bad reload %d: no refusal naming %s; log:\n%s", i, bad.key, r.stdout.text())
			}
			if p := fmt.Sprint(refused["problems"]); !strings.Contains(p, bad.msg) {
				t.Errorf("bad reload %d: problems %s do not say %q", i, p, bad.msg)
			}
		}
		if code, v := adminCall(t, admin, "GET", "/api/backends", ""); code != 200 || v["generation"] != float64(3) {
			t.Errorf("status after the refused reloads: %d generation %v, want 3", code, v["generation"])
		}
		for _, name := range []string{"a.relay.test", "b.relay.test"} {
			if _, _, err := served(name); err != nil {
				t.Errorf("%s after the refused reloads: %v", name, err)
			}
		}

		// Challenges for b, as another instance sharing the storage
		// would have them in flight: answered while b is listed.
		// httpCode is the status of a request for token's challenge
		// under host: 200 with the key authorization when relay answers
		// it, 404 when relay orders host but has no such challenge, and
		// the route's 308 to https when relay orders nothing for host.
		httpCode := func(host, token string) int {
			t.Helper()
			cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true},
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			rq, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+"/.well-known/acme-challenge/"+token, nil)
			rq.Host = host
			resp, err := cl.Do(rq)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && string(body) != token+".thumbprint" {
				t.Fatalf("challenge %s of %s: 200 with %q, not its key authorization", token, host, body)
			}
			return resp.StatusCode
		}
		alpn := func(host string) error {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tlsAddr, &tls.Config{
				ServerName: host, InsecureSkipVerify: true, NextProtos: []string{acme.ALPN},
			})
			if err != nil {
				return err
			}
			defer c.Close()
			for _, ext := range c.ConnectionState().PeerCertificates[0].Extensions {
				if ext.Id.Equal(asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 1, 31}) {
					return nil
				}
			}
			return fmt.Errorf("the certificate for %s is no TLS-ALPN-01 answer", host)
		}
		plant(t, storage, "a.relay.test", acmeapi.ChallengeTypeHTTP01, "tokA")
		plant(t, storage, "b.relay.test", acmeapi.ChallengeTypeHTTP01, "tokB")
		for i := 0; i < 4*processes; i++ {
			if a, b, none := httpCode("a.relay.test", "tokA"), httpCode("b.relay.test", "tokB"), httpCode("b.relay.test", "tokC"); a != 200 || b != 200 || none != 404 {
				t.Fatalf("HTTP-01 while both are listed, request %d: a %d, b %d (want 200), b's unknown token %d (want 404)", i, a, b, none)
			}
		}
		plant(t, storage, "b.relay.test", acmeapi.ChallengeTypeTLSALPN01, "tokB")
		for i := 0; i < 4*processes; i++ {
			if err := alpn("b.relay.test"); err != nil {
				t.Fatalf("TLS-ALPN-01 for b while listed, handshake %d: %v", i, err)
			}
		}

		// Take b out, by the admin API.
		write("ops@relay.test", "a.relay.test")
		if code, v := adminCall(t, admin, "POST", "/reload", ""); code != 200 {
			t.Fatalf("POST /reload: %d %v", code, v)
		}
		waitReload(t, r, 4)
		// Each process drops b as it applies the configuration: poll
		// until every one refuses b's certificate.
		inEvery("b no longer served", "b.relay.test", func(err error) bool {
			var host x509.HostnameError
			return errors.As(err, &host)
		})
		for i := 0; i < 10*processes; i++ {
			if _, _, err := served("b.relay.test"); err == nil {
				t.Fatalf("handshake %d: b still served after the reload took it out", i)
			}
			if _, serial, err := served("a.relay.test"); err != nil || !aSerials[serial] {
				t.Fatalf("handshake %d: a serial %s err %v, want %v", i, serial, err, aSerials)
			}
			if err := alpn("b.relay.test"); err == nil {
				t.Fatalf("TLS-ALPN-01 for b answered after the reload took it out (handshake %d)", i)
			}
		}
		plant(t, storage, "b.relay.test", acmeapi.ChallengeTypeHTTP01, "tokB")
		for i := 0; i < 4*processes; i++ {
			if a, b := httpCode("a.relay.test", "tokA"), httpCode("b.relay.test", "tokB"); a != 200 || b != 308 {
				t.Fatalf("HTTP-01 after b is out, request %d: a %d (want 200), b %d (want the route's 308: relay no longer answers it)", i, a, b)
			}
		}
		if a, b, all := ca.OrdersFor("a.relay.test"), ca.OrdersFor("b.relay.test"), ca.Orders(); a != 1 || b != 1 || all != 2 {
			t.Errorf("orders at the end: a %d, b %d, all %d; want 1, 1, 2", a, b, all)
		}
		_, metrics := get(t, newClient(t), admin+"/metrics")
		if strings.Contains(metrics, `relay_acme_certificate_expiry_timestamp_seconds{name="b.relay.test"}`) ||
			!strings.Contains(metrics, `relay_acme_certificate_expiry_timestamp_seconds{name="a.relay.test"}`) {
			t.Errorf("/metrics should show a's certificate and not b's:\n%s", metrics)
		}
	})
}

// plant writes a challenge for name into the file storage at dir, where
// an instance sharing it writes the challenges it presents.
func plant(t *testing.T, dir, name, typ, token string) {
	t.Helper()
	issuers, err := os.ReadDir(filepath.Join(dir, "certificates"))
	if err != nil || len(issuers) != 1 {
		t.Fatalf("certificates in %s: %v %v", dir, issuers, err)
	}
	c := acmeapi.Challenge{Type: typ, Token: token, KeyAuthorization: token + ".thumbprint",
		Identifier: acmeapi.Identifier{Type: "dns", Value: name}}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "acme", issuers[0].Name(), "challenge_tokens")
	if err := os.MkdirAll(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(filepath.Join(tokens, name+".json"), string(b)); err != nil {
		t.Fatal(err)
	}
}

// holder is the index in pids of the process holding the connection
// accepted on port from the client's port, -1 when none does.
func holder(pids []int, port, client int) int {
	for i, pid := range pids {
		socks := tcpSockets(pid)
		dir := fmt.Sprintf("/proc/%d/fd", pid)
		es, _ := os.ReadDir(dir)
		for _, e := range es {
			target, err := os.Readlink(filepath.Join(dir, e.Name()))
			if err != nil {
				continue
			}
			inode, ok := strings.CutPrefix(target, "socket:[")
			if !ok {
				continue
			}
			if s, ok := socks[strings.TrimSuffix(inode, "]")]; ok && s.local == port && s.remote == client {
				return i
			}
		}
	}
	return -1
}
