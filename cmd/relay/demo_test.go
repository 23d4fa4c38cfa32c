package main

import (
	"net"
	"strings"
	"testing"
)

func TestDemoMode(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003", ":8080"} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("-demo needs %s, which is taken: %v", addr, err)
		}
		ln.Close()
	}
	r := launchRelay(t, "", "-demo")
	started, ok := r.waitLog(startTimeout, func(l logLine) bool { return l.Msg() == "relay started" })
	if !ok {
		if strings.Contains(r.stderr.text(), "address already in use") {
			t.Skipf("a demo port was taken after the check: %s", r.stderr.text())
		}
		t.Fatalf("relay -demo did not start\nstdout:\n%s\nstderr:\n%s", r.stdout.text(), r.stderr.text())
	}
	if _, port, _ := net.SplitHostPort(started.Str("listen")); port != "8080" || started.Num("healthy") != 3 {
		t.Fatalf("started line %v, want port 8080 and 3 healthy backends", started)
	}
	r.addr = "127.0.0.1:8080"
	demo := make([]*backendServer, 3)
	for i, port := range []string{"8001", "8002", "8003"} {
		demo[i] = &backendServer{hello: "Hello World from " + port + " server\n"}
	}
	assertCycle(t, sequence(t, newClient(t), r, 9), demo)
	r.stop()
}
