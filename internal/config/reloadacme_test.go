package config

import (
	"reflect"
	"slices"
	"testing"
)

// acmeFile is a configuration with an acme section of the lines given.
func acmeFile(lines ...string) string {
	return y(append([]string{"listen: 127.0.0.1:8080", "tls_listen: 127.0.0.1:8443",
		"backends: [http://127.0.0.1:8001]", "acme:"}, lines...)...)
}

// TestACMEDomainsIsLive: acme.domains is a live key, the acme section
// itself and its other keys are not, and the section's keys follow
// acme in the order of settingKeys.
func TestACMEDomainsIsLive(t *testing.T) {
	if !slices.Contains(LiveKeys, "acme.domains") {
		t.Errorf("LiveKeys %q lack acme.domains", LiveKeys)
	}
	for _, k := range []string{"acme", "acme.email", "acme.ca", "acme.storage", "acme.on_demand"} {
		if slices.Contains(LiveKeys, k) {
			t.Errorf("LiveKeys hold %s, which a reload does not apply", k)
		}
	}
	var inside []string
	for _, k := range settingKeys() {
		if len(k) > 5 && k[:5] == "acme." {
			inside = append(inside, k[5:])
		}
	}
	if !slices.Equal(inside, acmeKeys) {
		t.Errorf("the keys inside acme are %q, the section reads %q", inside, acmeKeys)
	}
}

// TestRestartOnlyInsideACME: a change inside the acme section is named
// by its key there; acme.domains is applied and not named; the
// section turned on or off is acme.
func TestRestartOnlyInsideACME(t *testing.T) {
	running := mustParse(t, acmeFile("  email: a@example.com", "  domains: [a.example.com]"))
	for _, tc := range []struct {
		name    string
		file    string
		restart []string
		changed []string
	}{
		{"domains", acmeFile("  email: a@example.com", "  domains: [a.example.com, b.example.com]"),
			nil, []string{"acme.domains"}},
		{"email", acmeFile("  email: b@example.com", "  domains: [a.example.com]"),
			[]string{"acme.email"}, []string{"acme.email"}},
		{"email and domains", acmeFile("  email: b@example.com", "  domains: [b.example.com]"),
			[]string{"acme.email"}, []string{"acme.email", "acme.domains"}},
		{"several", acmeFile("  email: a@example.com", "  domains: [a.example.com]", "  key_type: rsa2048",
			"  ca: https://ca.example.com/dir", "  challenges: [tls-alpn-01, http-01]", "  storage: {dir: elsewhere}",
			"  check_interval: 1m", "  on_demand: {allow: ['*.t.example.com']}"),
			[]string{"acme.ca", "acme.key_type", "acme.challenges", "acme.storage", "acme.check_interval", "acme.on_demand"},
			[]string{"acme.ca", "acme.key_type", "acme.challenges", "acme.storage", "acme.check_interval", "acme.on_demand"}},
		{"off", y("listen: 127.0.0.1:8080", "backends: [http://127.0.0.1:8001]"),
			[]string{"tls_listen", "acme"}, []string{"tls_listen", "acme"}},
		{"same, on other lines", y("backends: [http://127.0.0.1:8001]", "acme:", "  domains: [a.example.com]",
			"  email: a@example.com", "listen: 127.0.0.1:8080", "tls_listen: 127.0.0.1:8443"), nil, nil},
	} {
		next := mustParse(t, tc.file)
		if got := RestartOnly(running, next); !reflect.DeepEqual(got, tc.restart) {
			t.Errorf("%s: RestartOnly = %q, want %q", tc.name, got, tc.restart)
		}
		if got := Changed(running, next); !reflect.DeepEqual(got, tc.changed) {
			t.Errorf("%s: Changed = %q, want %q", tc.name, got, tc.changed)
		}
	}
	// The section turned on is acme too.
	plain := mustParse(t, y("listen: 127.0.0.1:8080", "backends: [http://127.0.0.1:8001]"))
	if got := RestartOnly(plain, running); !reflect.DeepEqual(got, []string{"tls_listen", "acme"}) {
		t.Errorf("acme turned on: RestartOnly = %q, want [tls_listen acme]", got)
	}
}
