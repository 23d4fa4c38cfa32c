package main

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// holdPort listens on a free loopback port, as something else on the
// machine would (Envoy's admin listener on 9901, say), until the test
// ends, and returns its address.
func holdPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// needDemoBackendPorts skips a test of relay -demo when its backends'
// ports are taken, which would fail it before what the test is about.
func needDemoBackendPorts(t *testing.T) {
	t.Helper()
	for _, port := range demoPorts {
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			t.Skipf("-demo needs 127.0.0.1:%s, which is taken: %v", port, err)
		}
		ln.Close()
	}
}

// A port relay -demo wants is taken: the error says which, and what to
// type to move it (the demo has no file to edit).
func TestDemoNamesTheFlagForABusyPort(t *testing.T) {
	needDemoBackendPorts(t)
	for _, c := range []struct {
		name string
		args func(busy string) []string
		want func(busy string) string
	}{
		{
			"admin",
			func(busy string) []string { return []string{"-demo", "-listen", "127.0.0.1:0", "-admin-listen", busy} },
			func(busy string) string {
				return "admin listener on " + busy + ": address already in use; pass -admin-listen 127.0.0.1:PORT, or -admin-listen '' to turn it off\n"
			},
		},
		{
			"listen",
			func(busy string) []string { return []string{"-demo", "-listen", busy} },
			func(busy string) string {
				return "listen on " + busy + ": address already in use; pass -listen HOST:PORT or -port PORT\n"
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			busy := holdPort(t)
			code, _, stderr := runRelay(t, c.args(busy)...)
			if code != 1 || !strings.Contains(stderr, "relay: "+c.want(busy)) {
				if strings.Contains(stderr, "demo backend on") {
					t.Skipf("a demo backend port was taken meanwhile: %s", stderr)
				}
				t.Errorf("exit %d, stderr:\n%s\nwant 1 and %q", code, stderr, c.want(busy))
			}
		})
	}
}

// With a file, the error names the file's key beside the flag.
func TestBusyPortNamesTheKeyInTheFile(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	busy := holdPort(t)
	cfg := writeConfig(t, "admin_listen: "+busy+"\n"+backendsYAML([]string{b.url}))
	// Run directly: the test helpers would pass -admin-listen, over the
	// file's.
	refusedWith(t, cfg, fmt.Sprintf("admin listener on %s: address already in use; pass -admin-listen 127.0.0.1:PORT, or -admin-listen '' to turn it off, or change admin_listen in %s\n", busy, cfg))
}

// With several processes the supervisor opens the client listener; its
// error names the flag and the key as relay alone does.
func TestBusyPortWithProcessesNamesTheFlag(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	busy := holdPort(t)
	cfg := writeFile(t, t.TempDir(), "relay.yml", "listen: "+busy+"\nprocesses: 2\nadmin_listen: \"\"\n"+backendsYAML([]string{b.url}))
	refusedWith(t, cfg, fmt.Sprintf("listen on %s: address already in use; pass -listen HOST:PORT or -port PORT, or change listen in %s\n", busy, cfg))
}

// refusedWith runs relay on the file cfg alone and wants it to exit 1
// with want among what it printed on stderr.
func refusedWith(t *testing.T, cfg, want string) {
	t.Helper()
	cmd := exec.Command(relayBin, "-config", cfg)
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	if code, stderr := cmd.ProcessState.ExitCode(), out.String(); code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and %q", code, stderr, want)
	}
}

// A demo backend's port is taken: no flag moves it, so the error says
// which port and what may hold it.
func TestDemoBackendPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:"+demoPorts[1])
	if err == nil {
		defer ln.Close()
	} // else something holds it already, which is the case under test
	code, _, stderr := runRelay(t, "-demo", "-listen", "127.0.0.1:0")
	want := "demo backend on 127.0.0.1:" + demoPorts[1] + ": address already in use; relay -demo runs its backends on 127.0.0.1:8001-8003, so stop what holds the port"
	if code != 1 || !strings.Contains(stderr, want) {
		if strings.Contains(stderr, "demo backend on 127.0.0.1:"+demoPorts[0]) {
			t.Skipf("%s was taken too: %s", demoPorts[0], stderr)
		}
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and %q", code, stderr, want)
	}
}

// relay -demo on a machine whose hard open-file limit cannot hold the
// default max_connections (16384 connections need about 33,000
// descriptors) starts without the warning; a file that sets that cap
// under the same limit still gets it.
func TestDemoFitsTheOpenFileLimit(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit is not installed")
	}
	needDemoBackendPorts(t)
	low := []string{"prlimit", "--nofile=4096:4096"}
	warned := func(r *relay) bool {
		_, ok := r.waitLog(0, func(l logLine) bool { return strings.HasPrefix(l.Msg(), "open-file limit is too low") })
		return ok
	}

	r, _ := startRelayUnder(t, "", low, "-demo", "-listen", "127.0.0.1:0")
	if warned(r) {
		t.Errorf("relay -demo warned about the open-file limit:\n%s", r.stdout.text())
	}
	r.stop()

	b := newBackend(t, nil)
	cfg := writeConfig(t, "max_connections: 16384\n"+backendsYAML([]string{b.url}))
	r, _ = startRelayUnder(t, "", low, "-config", cfg)
	if !warned(r) {
		t.Errorf("max_connections 16384 under an open-file limit of 4096 started without the warning:\n%s", r.stdout.text())
	}
	r.stop()
}
