package config

import (
	"reflect"
	"testing"
	"time"
)

func TestDiscoveryReadsEtcd(t *testing.T) {
	c := mustParse(t, y(
		"discovery:",
		"  etcd:",
		"    endpoints: [http://10.0.0.1:2379, http://10.0.0.2:2379]",
		"    prefix: /relay/backends/",
		"    dial_timeout: 5s",
		"    username: relay",
		"    password: secret",
		"    announce:",
		"      url: http://10.0.0.9:8080",
		"      prefix: /relay/instances/",
	))
	want := &Etcd{
		Endpoints: []string{"http://10.0.0.1:2379", "http://10.0.0.2:2379"}, Prefix: "/relay/backends/",
		DialTimeout: 5 * time.Second, Username: "relay", Password: "secret",
		Announce: &Announce{URL: "http://10.0.0.9:8080", Prefix: "/relay/instances/", TTL: DefaultAnnounceTTL, Weight: 1},
	}
	if !reflect.DeepEqual(c.Discovery.Etcd, want) {
		t.Fatalf("got %+v\nwant %+v", c.Discovery.Etcd, want)
	}
	if len(c.Backends) != 0 {
		t.Fatalf("%d backends, want none: discovery alone is a valid pool", len(c.Backends))
	}
}

func TestDiscoveryDefaultsAndReload(t *testing.T) {
	a := mustParse(t, y("backends:", "  - http://127.0.0.1:8001", "discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /b/"))
	if e := a.Discovery.Etcd; e.DialTimeout != DefaultEtcdDialTimeout || e.Announce != nil || e.UsesTLS() {
		t.Fatalf("defaults: %+v", e)
	}
	b := mustParse(t, y("backends:", "  - http://127.0.0.1:8001", "discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /c/"))
	if got := RestartOnly(a, b); len(got) != 0 {
		t.Fatalf("a changed discovery section needs a restart of %v; it applies live", got)
	}
	if c := mustParse(t, y("backends:", "  - http://127.0.0.1:8001", "discovery:")); c.Discovery.Etcd != nil {
		t.Fatalf("an empty discovery section watches %+v", c.Discovery.Etcd)
	}
}
