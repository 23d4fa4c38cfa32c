package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"relay/internal/discovery"
	"relay/internal/etcdtest"
)

// TestStartRefusesItselfAsBackend: a configuration whose backend is
// relay's own listen or admin address, however written, does not start,
// and the error names the entry's line, the backend and the address.
func TestStartRefusesItselfAsBackend(t *testing.T) {
	t.Parallel()
	b := newBackend(t, nil)
	port, admin := freePort(t), freePort(t)
	content := "listen: 127.0.0.1:" + port + "\nadmin_listen: 127.0.0.1:" + admin + "\n" +
		backendsYAML([]string{b.url, "http://localhost:" + port, "http://127.0.0.1:" + admin})
	path := writeFile(t, t.TempDir(), "relay.yml", content)
	code, stdout, stderr := runRelay(t, "-config", path, "-admin-listen=127.0.0.1:"+admin)
	for _, want := range []string{
		path + `:5: backends[1].url: "http://localhost:` + port + `" is relay's own address (listen "127.0.0.1:` + port + `")`,
		path + `:6: backends[2].url: "http://127.0.0.1:` + admin + `" is relay's own address (admin_listen "127.0.0.1:` + admin + `")`,
		"refusing to start",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code == 0 || strings.Contains(stdout, "relay started") {
		t.Errorf("relay started (exit %d):\n%s", code, stdout)
	}
}

// TestAdminAPIRefusesItselfAsBackend: POST /api/backends with relay's
// own client or admin address is a 400 naming it, with one process and
// with two, where the port was 0 in the file and the control learns the
// one relay listens on.
func TestAdminAPIRefusesItselfAsBackend(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		b := newBackend(t, nil)
		_, started := startRelay(t, "", "-config", writeConfig(t, "access_log: false\nprocesses: "+strconv.Itoa(processes)+"\n"+backendsYAML([]string{b.url})))
		admin := adminOf(t, started)
		port := portOf(t, started.Str("listen"))
		for _, c := range []struct{ url, which string }{
			{"http://localhost:" + port, "(listen "},
			{"http://127.0.0.1:" + port, "(listen "},
			{admin, "(admin_listen "},
		} {
			code, v := adminCall(t, admin, "POST", "/api/backends", `{"url": "`+c.url+`"}`)
			msg, _ := v["error"].(string)
			if code != 400 || !strings.Contains(msg, c.url+`" is relay's own address `+c.which) {
				t.Errorf("POST %s: %d %v; want 400 naming it as relay's own address %s", c.url, code, v, c.which)
			}
		}
		if got := backendsOf(t, admin); len(got) != 1 {
			t.Errorf("after the refused calls relay lists %d backends, want 1", len(got))
		}
	})
}

// TestDiscoveryIgnoresItselfAsBackend: an etcd key announcing relay's own
// address is ignored and logged, also when it replaces a good value (the
// key keeps that), while the other keys come in.
func TestDiscoveryIgnoresItselfAsBackend(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	cli := srv.Client()
	good, other := newBackend(t, nil), newBackend(t, nil)
	announce(srv, cli, "good", good)
	r, started := startRelay(t, "", "-config", writeConfig(t, "access_log: false\n"+discoveryYAML(srv.Endpoint)))
	admin := adminOf(t, started)
	awaitMembers(t, admin, 10*time.Second, good.url)

	self := "http://localhost:" + portOf(t, started.Str("listen"))
	srv.Put(cli, etcdPrefix+"self", string(discovery.Marshal(self, 1)))
	srv.Put(cli, etcdPrefix+"good", string(discovery.Marshal(self, 1)))
	announce(srv, cli, "other", other) // after the bad puts: once it is in, they were judged
	awaitMembers(t, admin, 10*time.Second, good.url, other.url)
	for _, key := range []string{"self", "good"} {
		l, ok := r.waitLog(5*time.Second, func(l logLine) bool {
			err := l.Str("err")
			return strings.Contains(err, `etcd key "`+etcdPrefix+key+`"`) && strings.Contains(err, `"`+self+`" is relay's own address (listen `)
		})
		if !ok {
			t.Errorf("no log line says key %s names relay itself", key)
			continue
		}
		if key == "good" && l.Str("backend") != good.url {
			b, _ := json.Marshal(l)
			t.Errorf("the log line does not say the key keeps %s: %s", good.url, b)
		}
	}
	awaitAnswer(t, r.url("/"), "", 5*time.Second)
}
