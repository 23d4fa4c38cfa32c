package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"relay/internal/pebbletest"
)

// TestACMECADownAtStart: relay, alone and with two processes, starts
// while its CA is down, with no email (an account without a contact).
// Its log names the name and the next attempt, seconds away; the CA
// comes back, and every process serves the certificate within seconds,
// from one order. relay printed no prompt and waited on no input: its
// standard input is an open, empty pipe.
func TestACMECADownAtStart(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		port := freePort(t)
		tlsPort, _ := strconv.Atoi(port)
		ca := pebbletest.Start(t, pebbletest.Options{TLSPort: tlsPort})
		ca.Stop()
		be := newBackend(t, nil)
		file := writeConfig(t, fmt.Sprintf("processes: %d\ntls_listen: 127.0.0.1:%s\n", processes, port)+
			"acme:\n  ca: "+ca.DirectoryURL()+"\n  ca_root: "+ca.RootPEMFile()+
			"\n  domains: [down.relay.test]\n  storage: {dir: "+t.TempDir()+"}\n"+backendsYAML([]string{be.url}))
		r, _ := startRelay(t, "", "-config", file)
		failed, ok := r.waitLog(15*time.Second, func(l logLine) bool { return l.Msg() == "ACME order failed" })
		if !ok {
			t.Fatalf("no failed order logged while the CA is down\nstdout:\n%s", r.stdout.text())
		}
		if failed.Str("name") != "down.relay.test" || failed.Str("retry_in") != "2s" {
			t.Errorf("failure line %v; want the name and retry_in 2s", failed)
		}
		ca.Restart()
		back := time.Now()
		addr := net.JoinHostPort("127.0.0.1", port)
		waitServed(t, addr, ca.IssuerRoots(), 20*time.Second, "down.relay.test")
		t.Logf("served %v after the CA came back", time.Since(back).Round(10*time.Millisecond))
		for i := range 20 {
			if err := acmeHandshake(addr, "down.relay.test", ca.IssuerRoots()); err != nil {
				t.Fatalf("handshake %d: %v", i, err)
			}
		}
		if n := ca.Orders(); n != 1 {
			t.Errorf("the CA saw %d orders, want 1", n)
		}
		for _, l := range strings.Split(r.stdout.text(), "\n") {
			if l != "" && parseLogLine(l) == nil {
				t.Errorf("stdout has a line that is not relay's log: %q", l)
			}
		}
	})
}
