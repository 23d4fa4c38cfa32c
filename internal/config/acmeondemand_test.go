package config

import (
	"slices"
	"strings"
	"testing"
)

func TestACMEOnDemandSection(t *testing.T) {
	c := mustParse(t, y(
		"tls_listen: :8443",
		"backends: [http://127.0.0.1:9000]",
		"acme:",
		"  on_demand:",
		"    allow: [Shop.Example.COM., \"*.tenants.example.com\"]",
		"    ask: http://127.0.0.1:9001/check?from=relay",
	))
	o := c.ACME.OnDemand
	if o == nil {
		t.Fatal("no on_demand settings")
	}
	if !slices.Equal(o.Allow, []string{"shop.example.com", "*.tenants.example.com"}) {
		t.Errorf("allow %v", o.Allow)
	}
	if o.Ask != "http://127.0.0.1:9001/check?from=relay" || o.PerMinute != DefaultACMEOnDemandPerMinute {
		t.Errorf("on_demand %+v", o)
	}
	if len(c.ACME.Domains) != 0 {
		t.Errorf("domains %v, want none", c.ACME.Domains)
	}
	c = mustParse(t, y(
		"tls_listen: :8443",
		"backends: [http://127.0.0.1:9000]",
		"acme: {domains: [example.com], on_demand: {ask: \"https://auth.internal/ok\", per_minute: 2}}",
	))
	if o := c.ACME.OnDemand; o.PerMinute != 2 || o.Allow != nil || o.Ask != "https://auth.internal/ok" {
		t.Errorf("on_demand %+v", o)
	}
	if c := mustParse(t, "tls_listen: :8443\nbackends: [http://127.0.0.1:9000]\nacme: {domains: [example.com]}\n"); c.ACME.OnDemand != nil {
		t.Errorf("on_demand %+v without the key", c.ACME.OnDemand)
	}
}

func TestACMEOnDemandProblems(t *testing.T) {
	base := "tls_listen: :8443\nbackends: [http://127.0.0.1:9000]\n"
	for _, tc := range []struct{ yaml, key, msg string }{
		{"acme: {on_demand: {}}", "acme.on_demand", "needs allow"},
		{"acme: {on_demand: {allow: []}}", "acme.on_demand", "unrestricted"},
		{"acme: {on_demand: [x]}", "acme.on_demand", "must be a mapping"},
		{"acme: {on_demand: {allow: ['*.*.example.com']}}", "acme.on_demand.allow[0]", "matches no name"},
		{"acme: {on_demand: {allow: ['a*.example.com']}}", "acme.on_demand.allow[0]", "matches no name"},
		{"acme: {on_demand: {allow: ['example.*']}}", "acme.on_demand.allow[0]", "matches no name"},
		{"acme: {on_demand: {allow: ['*']}}", "acme.on_demand.allow[0]", "matches no name"},
		{"acme: {on_demand: {allow: ['*.com']}}", "acme.on_demand.allow[0]", "no dot"},
		{"acme: {on_demand: {allow: [192.0.2.1]}}", "acme.on_demand.allow[0]", "is an address"},
		{"acme: {on_demand: {allow: ['a b.example.com']}}", "acme.on_demand.allow[0]", "not a host name"},
		{"acme: {on_demand: {allow: [a.example.com, A.example.com]}}", "acme.on_demand.allow[1]", "listed twice"},
		{"acme: {on_demand: {allow: x.example.com}}", "acme.on_demand.allow", ""},
		{"acme: {on_demand: {ask: ftp://auth/ok}}", "acme.on_demand.ask", "http:// or https://"},
		{"acme: {on_demand: {ask: /ok}}", "acme.on_demand.ask", "http:// or https://"},
		{"acme: {on_demand: {ask: 'http://auth/ok#x'}}", "acme.on_demand.ask", "fragment"},
		{"acme: {on_demand: {ask: 'http://auth/ok?domain=x'}}", "acme.on_demand.ask", "relay adds it"},
		{"acme: {on_demand: {allow: [a.example.com], per_minute: 0}}", "acme.on_demand.per_minute", "at least 1"},
		{"acme: {on_demand: {allow: [a.example.com], per_minute: many}}", "acme.on_demand.per_minute", ""},
		{"acme: {on_demand: {allow: [a.example.com], asks: http://x/}}", "acme.on_demand.asks", "did you mean"},
		{"acme: {}", "acme.domains", "or on_demand"},
	} {
		ps := problems(t, parseErr(base+tc.yaml))
		found := false
		for _, p := range ps {
			if p.Key == tc.key && strings.Contains(p.Msg, tc.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: problems %v, want %s: ...%s...", tc.yaml, ps, tc.key, tc.msg)
		}
	}
}
