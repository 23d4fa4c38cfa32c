package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestAdminAllowedHostsAreReadInHostHeaderForm(t *testing.T) {
	c := mustParse(t, y(
		`admin_allowed_hosts: [Relay-Admin.Internal, "relay.example.com:8443", 10.0.0.5, "[::1]:9901", "fd00::0:5", "[FD00::7]"]`,
		"backends:", "  - http://127.0.0.1:8001"))
	want := []string{"relay-admin.internal", "relay.example.com:8443", "10.0.0.5", "[::1]:9901", "[fd00::5]", "[fd00::7]"}
	if !reflect.DeepEqual(c.AdminAllowedHosts, want) {
		t.Fatalf("admin_allowed_hosts = %q, want %q", c.AdminAllowedHosts, want)
	}
	if d := mustParse(t, y("backends:", "  - http://127.0.0.1:8001")); d.AdminAllowedHosts != nil {
		t.Fatalf("default admin_allowed_hosts = %q, want none", d.AdminAllowedHosts)
	}
}

func TestAdminAllowedHostsProblems(t *testing.T) {
	for _, tt := range []struct{ entry, msg string }{
		{`""`, "is empty"},
		{"http://relay.internal", "is a URL; give the host alone"},
		{"relay.internal/admin", "is not a host name, an IP address or either with :PORT"},
		{`"*.internal"`, "wildcards and paths are not supported"},
		{"relay.internal:0", `port "0" in "relay.internal:0" is not a number from 1 to 65535`},
		{"relay.internal:99999", "is not a number from 1 to 65535"},
		{"relay.internal:http", "is not a number from 1 to 65535"},
		{`"relay.internal:"`, "is not a number from 1 to 65535"},
		{"exa!mple", `host "exa!mple" in "exa!mple" is not a valid host name`},
		{"fd00::5:x", "an IPv6 address with a port needs brackets"},
		{`"[fe80::1%eth0]"`, "IPv6 zones are not supported"},
		{`"[relay.internal]"`, "only an IPv6 address goes in brackets"},
	} {
		_, err := Parse([]byte(y("backends:", "  - http://127.0.0.1:8001", "admin_allowed_hosts:", "  - ok.internal", "  - "+tt.entry)), "test.yml", testOpts)
		ps := problems(t, err)
		if len(ps) != 1 || ps[0].Line != 5 || ps[0].Key != "admin_allowed_hosts[1]" || !strings.Contains(ps[0].Msg, tt.msg) {
			t.Errorf("%s: problems %v; want one at line 5, admin_allowed_hosts[1], containing %q", tt.entry, ps, tt.msg)
		}
	}
	_, err := Parse([]byte(y("backends:", "  - http://127.0.0.1:8001", "admin_allowed_hosts: relay.internal")), "test.yml", testOpts)
	if ps := problems(t, err); len(ps) != 1 || ps[0].Key != "admin_allowed_hosts" || !strings.Contains(ps[0].Msg, "must be a list") {
		t.Errorf("a single string: %v; want it refused as not a list", ps)
	}
}
