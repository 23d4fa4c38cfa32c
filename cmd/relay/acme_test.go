package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"relay/internal/etcdtest"
	"relay/internal/pebbletest"
	"relay/internal/redistest"
)

// TestACMEServesOrderedCertificates: relay, alone and with two
// processes, orders certificates for two names from Pebble by
// TLS-ALPN-01 (answered by whichever process the CA reaches, asking the
// control for the challenge) and serves them in every process: 20 new
// connections per name all get a certificate that verifies. The CA sees
// one order per name.
func TestACMEServesOrderedCertificates(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		port := freePort(t)
		tlsPort, _ := strconv.Atoi(port)
		ca := pebbletest.Start(t, pebbletest.Options{TLSPort: tlsPort})
		be := newBackend(t, nil)
		names := []string{"a.relay.test", "b.relay.test"}
		file := writeConfig(t, fmt.Sprintf("processes: %d\ntls_listen: 127.0.0.1:%s\n", processes, port)+
			"acme:\n  email: ops@relay.test\n  ca: "+ca.DirectoryURL()+"\n  ca_root: "+ca.RootPEMFile()+
			"\n  domains: [a.relay.test, b.relay.test]\n  storage: {dir: "+t.TempDir()+"}\n"+backendsYAML([]string{be.url}))
		_, started := startRelay(t, "", "-config", file)
		addr := net.JoinHostPort("127.0.0.1", port)
		handshake := func(name string) error { return acmeHandshake(addr, name, ca.IssuerRoots()) }
		waitServed(t, addr, ca.IssuerRoots(), 30*time.Second, names...)
		// Every process has them: new connections spread over the
		// processes' sockets.
		for i := 0; i < 20; i++ {
			for _, name := range names {
				if err := handshake(name); err != nil {
					var unknown x509.UnknownAuthorityError
					t.Fatalf("handshake %d for %s: %v (%T)", i, name, err, unknown)
				}
			}
		}
		if n := ca.Orders(); n != len(names) {
			t.Errorf("the CA saw %d orders for %d names", n, len(names))
		}
		_, metrics := get(t, newClient(t), adminOf(t, started)+"/metrics")
		for _, want := range []string{"relay_acme_orders_total 2", "relay_acme_certificates_obtained_total 2", "relay_acme_failures_total 0",
			`relay_acme_certificate_expiry_timestamp_seconds{name="a.relay.test"}`, `relay_acme_certificate_expiry_timestamp_seconds{name="b.relay.test"}`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

// TestACMEInstancesShareStorage: three relay instances, one with
// processes: 2, on 127.0.0.1, .2 and .3, share etcd (and, separately,
// Redis) as their certificate storage and start cold with five names.
// The CA resolves every name to the second instance, so it validates
// the orders the others begin through an instance that answers from
// storage. The CA sees exactly five orders, and every instance serves
// all five names.
func TestACMEInstancesShareStorage(t *testing.T) {
	names := []string{"a.relay.test", "b.relay.test", "c.relay.test", "d.relay.test", "e.relay.test"}
	for _, kind := range []string{"etcd", "redis"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var section string
			if kind == "etcd" {
				srv := etcdtest.Start(t)
				section = "discovery:\n  etcd:\n    endpoints: [" + srv.Endpoint + "]\n    prefix: /relay/backends/\n"
			} else {
				section = "redis: {address: " + redistest.Start(t).Addr() + "}\n"
			}
			port := freePort(t)
			tlsPort, _ := strconv.Atoi(port)
			ca := pebbletest.Start(t, pebbletest.Options{TLSPort: tlsPort,
				Resolve: func(string) []netip.Addr { return []netip.Addr{netip.MustParseAddr("127.0.0.2")} }})
			be := newBackend(t, nil)
			hosts := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
			for i, host := range hosts {
				processes := 1
				if i == 0 {
					processes = 2
				}
				file := writeConfig(t, fmt.Sprintf("processes: %d\ntls_listen: %s:%s\n", processes, host, port)+section+
					"acme:\n  email: ops@relay.test\n  ca: "+ca.DirectoryURL()+"\n  ca_root: "+ca.RootPEMFile()+
					"\n  domains: ["+strings.Join(names, ", ")+"]\n  storage: {type: "+kind+"}\n"+backendsYAML([]string{be.url}))
				launchRelay(t, "", "-config", file) // all three at once: a cold start
			}
			for _, host := range hosts {
				for _, name := range names {
					addr := net.JoinHostPort(host, port)
					deadline := time.Now().Add(45 * time.Second)
					for {
						c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
							&tls.Config{ServerName: name, RootCAs: ca.IssuerRoots(), NextProtos: []string{"http/1.1"}})
						if err == nil {
							c.Close()
							break
						}
						if time.Now().After(deadline) {
							t.Fatalf("%s at %s: no verified certificate within 45 s: %v", name, addr, err)
						}
						time.Sleep(50 * time.Millisecond)
					}
				}
			}
			if n := ca.Orders(); n != len(names) {
				t.Errorf("the CA saw %d orders for %d names", n, len(names))
			}
		})
	}
}

// TestACMERenewsWhileServing: certificates that live 12 s are renewed
// while a client makes handshakes through two processes; no handshake
// fails, and the client sees the renewed certificate before the first
// one expires.
func TestACMERenewsWhileServing(t *testing.T) {
	port := freePort(t)
	tlsPort, _ := strconv.Atoi(port)
	ca := pebbletest.Start(t, pebbletest.Options{TLSPort: tlsPort, Validity: 12 * time.Second})
	be := newBackend(t, nil)
	file := writeConfig(t, "processes: 2\ntls_listen: 127.0.0.1:"+port+"\n"+
		"acme:\n  email: ops@relay.test\n  ca: "+ca.DirectoryURL()+"\n  ca_root: "+ca.RootPEMFile()+
		"\n  domains: [renew.relay.test]\n  check_interval: 1s\n  storage: {dir: "+t.TempDir()+"}\n"+backendsYAML([]string{be.url}))
	startRelay(t, "", "-config", file)
	addr := net.JoinHostPort("127.0.0.1", port)
	leaf := func() (*x509.Certificate, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr,
			&tls.Config{ServerName: "renew.relay.test", RootCAs: ca.IssuerRoots(), NextProtos: []string{"http/1.1"}})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0], nil
	}
	var first *x509.Certificate
	deadline := time.Now().Add(30 * time.Second)
	for first == nil {
		first, _ = leaf()
		if time.Now().After(deadline) {
			t.Fatal("no verified certificate within 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	handshakes := 0
	for {
		l, err := leaf()
		handshakes++
		if err != nil {
			t.Fatalf("handshake %d failed: %v", handshakes, err)
		}
		if l.SerialNumber.Cmp(first.SerialNumber) != 0 {
			if !l.NotAfter.After(first.NotAfter) {
				t.Errorf("the renewed certificate ends %v, not after %v", l.NotAfter, first.NotAfter)
			}
			if time.Now().After(first.NotAfter) {
				t.Errorf("the renewed certificate came after the first expired")
			}
			break
		}
		if time.Now().After(first.NotAfter) {
			t.Fatalf("the first certificate expired after %d handshakes and no renewal was served", handshakes)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("%d handshakes, none failed, until the renewed certificate was served", handshakes)
}

// acmeHandshake makes one TLS handshake to addr with SNI name and
// verifies the certificate against roots.
func acmeHandshake(addr, name string, roots *x509.CertPool) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{
		ServerName: name, RootCAs: roots, NextProtos: []string{"http/1.1"},
	})
	if err != nil {
		return err
	}
	return c.Close()
}

// waitServed polls until a handshake for each name verifies against
// roots, or fails the test after within.
func waitServed(t *testing.T, addr string, roots *x509.CertPool, within time.Duration, names ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, name := range names {
		for {
			err := acmeHandshake(addr, name, roots)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no verified certificate within %v: %v", name, within, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
