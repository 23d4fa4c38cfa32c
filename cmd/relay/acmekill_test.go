package main

import (
	"fmt"
	"net"
	"testing"
	"time"

	"relay/internal/etcdtest"
	"relay/internal/pebbletest"
	"relay/internal/redistest"
)

// TestACMELockHolderKilled: two relay instances share etcd (and,
// separately, Redis) as their certificate storage and manage one name.
// The first orders it, and the CA holds that order's finalization, so
// the first holds the name's storage lock while the second waits on it.
// The first is killed (SIGKILL: no unlock, no lease revoked). The second
// takes the lock when the dead holder's lease runs out (10 s), orders,
// and serves the name within two lease periods of the kill; the CA saw
// two orders, the dead one's and the second's.
func TestACMELockHolderKilled(t *testing.T) {
	const name = "held.relay.test"
	const lease = 10 * time.Second // acme.storageLease
	for _, kind := range []string{"etcd", "redis"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var section string
			if kind == "etcd" {
				section = "discovery:\n  etcd:\n    endpoints: [" + etcdtest.Start(t).Endpoint + "]\n    prefix: /relay/backends/\n"
			} else {
				section = "redis: {address: " + redistest.Start(t).Addr() + "}\n"
			}
			port := freePort(t)
			ca := pebbletest.Start(t, pebbletest.Options{AlwaysValid: true})
			release := ca.HoldFinalize(name)
			t.Cleanup(release)
			be := newBackend(t, nil)
			config := func(host string, processes int) string {
				return writeConfig(t, fmt.Sprintf("processes: %d\ntls_listen: %s:%s\n", processes, host, port)+section+
					"acme:\n  email: ops@relay.test\n  ca: "+ca.DirectoryURL()+"\n  ca_root: "+ca.RootPEMFile()+
					"\n  domains: ["+name+"]\n  storage: {type: "+kind+"}\n"+backendsYAML([]string{be.url}))
			}
			holder, _ := startRelay(t, "", "-config", config("127.0.0.1", 1))
			waitFor(t, 20*time.Second, "the first instance's order held at finalization", func() bool { return ca.Holding() == 1 })
			waiter, _ := startRelay(t, "", "-config", config("127.0.0.2", 2))
			addr := net.JoinHostPort("127.0.0.2", port)
			// For two seconds the second instance waits on the lock: no
			// order of its own begins, and it serves no certificate.
			for until := time.Now().Add(2 * time.Second); time.Now().Before(until); time.Sleep(100 * time.Millisecond) {
				if n := ca.OrdersFor(name); n != 1 {
					t.Fatalf("while the first instance holds the lock the CA saw %d orders, want 1", n)
				}
				if acmeHandshake(addr, name, ca.IssuerRoots()) == nil {
					t.Fatal("the second instance serves the name while the first holds its lock")
				}
			}
			if err := holder.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			<-holder.done
			// The dead holder's finalization leaves with its connection;
			// the second instance's is not held.
			waitFor(t, 10*time.Second, "the dead holder's finalization to end", func() bool { return ca.Holding() == 0 })
			release()
			waitServed(t, addr, ca.IssuerRoots(), 2*lease, name)
			took := time.Since(killed)
			t.Logf("%s: served by the second instance %v after the holder was killed (lease %v)", kind, took.Round(10*time.Millisecond), lease)
			if took > 2*lease {
				t.Errorf("served %v after the kill, more than two lease periods", took)
			}
			if n := ca.OrdersFor(name); n != 2 {
				t.Errorf("the CA saw %d orders, want 2: the dead holder's and the second instance's", n)
			}
			if n := waiter.countLog("ACME order failed"); n != 0 {
				t.Errorf("the second instance logged %d failed orders; it should have waited on the lock", n)
			}
		})
	}
}

// waitFor polls cond until it holds, or fails the test after within.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countLog is the number of log lines with msg so far.
func (r *relay) countLog(msg string) int {
	n := 0
	for _, l := range r.logs() {
		if l.Msg() == msg {
			n++
		}
	}
	return n
}
