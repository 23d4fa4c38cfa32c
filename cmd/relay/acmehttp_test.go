package main

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"relay/internal/pebbletest"
)

// TestACMEIssuesByHTTP01: relay, alone and with two processes, with
// challenges: [http-01] only and a route that redirects every cleartext
// request to https, orders certificates for two names from Pebble,
// whose validation authority asks relay's cleartext listener (three
// times per challenge, as from three vantage points): the answers come
// before the redirect, from whichever process took the connection. Then
// handshakes on relay's TLS port with those names verify against
// Pebble's roots, and a cleartext request for another path still gets
// the redirect.
func TestACMEIssuesByHTTP01(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		port, tlsPort := freePort(t), freePort(t)
		httpPort, _ := strconv.Atoi(port)
		ca := pebbletest.Start(t, pebbletest.Options{HTTPPort: httpPort})
		be := newBackend(t, nil)
		names := []string{"a.relay.test", "b.relay.test"}
		file := writeFile(t, t.TempDir(), "relay.yml", fmt.Sprintf("listen: 127.0.0.1:%s\nlog_level: info\nprocesses: %d\ntls_listen: 127.0.0.1:%s\n", port, processes, tlsPort)+
			"acme:\n  email: ops@relay.test\n  ca: "+ca.DirectoryURL()+"\n  ca_root: "+ca.RootPEMFile()+
			"\n  domains: [a.relay.test, b.relay.test]\n  challenges: [http-01]\n  storage: {dir: "+t.TempDir()+"}\n"+
			"routes:\n  - name: https\n    match: {scheme: http}\n    redirect: {status: 308, scheme: https}\n"+backendsYAML([]string{be.url}))
		startRelay(t, "", "-config", file)
		addr := net.JoinHostPort("127.0.0.1", tlsPort)
		handshake := func(name string) error { return acmeHandshake(addr, name, ca.IssuerRoots()) }
		waitServed(t, addr, ca.IssuerRoots(), 30*time.Second, names...)
		for i := 0; i < 10; i++ {
			for _, name := range names {
				if err := handshake(name); err != nil {
					t.Fatalf("handshake %d for %s: %v", i, name, err)
				}
			}
		}
		if n := ca.Orders(); n != len(names) {
			t.Errorf("the CA saw %d orders for %d names", n, len(names))
		}
		// The route still redirects the rest of the cleartext, and a
		// token no challenge has is relay's 404.
		cl := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for target, want := range map[string]int{"/x": 308, "/.well-known/acme-challenge/none": 404} {
			rq, _ := http.NewRequest("GET", "http://127.0.0.1:"+port+target, nil)
			rq.Host = "a.relay.test"
			resp, err := cl.Do(rq)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("%s: %d, want %d", target, resp.StatusCode, want)
			}
		}
	})
}
