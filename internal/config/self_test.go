package config

import (
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// interfaceAddr is an address of one of this machine's interfaces other
// than loopback, or "" when there is none.
func interfaceAddr(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err == nil && !p.Addr().IsLoopback() && p.Addr().Is4() {
			return p.Addr().String()
		}
	}
	return ""
}

// TestSelfAddress: a backend is relay itself when it names one of
// relay's listeners, by the same address, by any address of this machine
// for a wildcard listener, or by a name that resolves to it; a listener
// that is off or on port 0 is nobody.
func TestSelfAddress(t *testing.T) {
	local := interfaceAddr(t)
	type tc struct {
		backend string
		self    bool
		key     string // the listener named in the message
	}
	for _, c := range []struct {
		name      string
		listeners Listeners
		cases     []tc
	}{
		{"wildcard listen", Listeners{Listen: ":18080", AdminListen: "127.0.0.1:19901"}, []tc{
			{"http://127.0.0.1:18080", true, "listen"},
			{"http://127.0.0.2:18080", true, "listen"},
			{"http://localhost:18080", true, "listen"},
			{"http://LocalHost:18080", true, "listen"},
			{"http://[::1]:18080", true, "listen"},
			{"http://0.0.0.0:18080", true, "listen"},
			{"http://[::ffff:127.0.0.1]:18080", true, "listen"},
			{"https://127.0.0.1:18080", true, "listen"},
			{"http://127.0.0.1:018080", true, "listen"},
			{"http://127.0.0.1:18081", false, ""},
			{"http://198.51.100.77:18080", false, ""},
			{"http://127.0.0.1:19901", true, "admin_listen"},
			{"http://localhost:19901", true, "admin_listen"},
			{"http://198.51.100.77:19901", false, ""},
		}},
		{"0.0.0.0 and [::] are wildcards", Listeners{Listen: "0.0.0.0:18080", TLSListen: "[::]:18443"}, []tc{
			{"http://127.0.0.1:18080", true, "listen"},
			{"http://[::1]:18080", true, "listen"},
			{"https://localhost:18443", true, "tls_listen"},
			{"http://127.0.0.1:18443", true, "tls_listen"},
		}},
		{"loopback listen", Listeners{Listen: "127.0.0.1:18080"}, []tc{
			{"http://127.0.0.1:18080", true, "listen"},
			{"http://localhost:18080", true, "listen"},
			{"http://0.0.0.0:18080", true, "listen"},
			{"http://127.0.0.2:18080", false, ""},
			{"http://[::1]:18080", false, ""},
		}},
		{"named listen", Listeners{Listen: "localhost:18080"}, []tc{
			{"http://localhost:18080", true, "listen"},
			{"http://127.0.0.1:18080", true, "listen"},
			{"http://127.0.0.1:18081", false, ""},
		}},
		{"default ports", Listeners{Listen: ":80", TLSListen: ":443"}, []tc{
			{"http://127.0.0.1", true, "listen"},
			{"https://localhost", true, "tls_listen"},
			{"http://198.51.100.77", false, ""},
		}},
		{"port 0 and off", Listeners{Listen: "127.0.0.1:0"}, []tc{
			{"http://127.0.0.1:0", false, ""},
			{"http://127.0.0.1:80", false, ""},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			self := SelfAddress(c.listeners)
			cases := c.cases
			if local != "" && c.listeners.Listen == ":18080" {
				// Another address of this machine reaches a wildcard
				// listener; a loopback one does not.
				cases = append(cases, tc{"http://" + local + ":18080", true, "listen"})
			}
			for _, tt := range cases {
				u, err := url.Parse(tt.backend)
				if err != nil {
					t.Fatal(err)
				}
				msg, got := self(u)
				if got != tt.self {
					t.Errorf("%s: self %v (%q), want %v", tt.backend, got, msg, tt.self)
					continue
				}
				if tt.self && (!strings.Contains(msg, tt.key+` "`) || !strings.Contains(msg, "relay's own address") ||
					!strings.Contains(msg, "itself")) {
					t.Errorf("%s: message %q does not name %s", tt.backend, msg, tt.key)
				}
			}
		})
	}
	if local != "" {
		u, _ := url.Parse("http://" + local + ":18080")
		if _, self := SelfAddress(Listeners{Listen: "127.0.0.1:18080"})(u); self {
			t.Errorf("%s reaches a listener on 127.0.0.1", u)
		}
	}
}

// TestCheckEnvironmentRefusesSelf: a backend at relay's own address is a
// problem at its entry's line, naming the backend and the listener.
func TestCheckEnvironmentRefusesSelf(t *testing.T) {
	c := mustParse(t, y(
		"listen: 127.0.0.1:18080",
		"admin_listen: 127.0.0.1:19901",
		"backends:",
		"  - http://127.0.0.1:8001",
		"  - url: http://localhost:18080",
		"  - http://127.0.0.1:19901",
	))
	ps := problems(t, c.CheckEnvironment())
	if len(ps) != 2 {
		t.Fatalf("problems %v, want two", ps)
	}
	for i, want := range []struct {
		line     int
		key, msg string
	}{
		{5, "backends[1].url", `"http://localhost:18080" is relay's own address (listen "127.0.0.1:18080")`},
		{6, "backends[2].url", `"http://127.0.0.1:19901" is relay's own address (admin_listen "127.0.0.1:19901")`},
	} {
		p := ps[i]
		if p.File != "test.yml" || p.Line != want.line || p.Key != want.key || !strings.Contains(p.Msg, want.msg) {
			t.Errorf("problem %d: %s; want test.yml:%d: %s: %s", i, p, want.line, want.key, want.msg)
		}
	}
}
