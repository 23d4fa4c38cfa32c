package main

import (
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"relay/internal/backend"
	"relay/internal/config"
	"relay/internal/control"
	"relay/internal/dataplane"
	"relay/internal/supervisor"
	"relay/internal/testcert"
)

// A reload refused because a new https backend's CA file is missing leaves
// the upstream TLS settings as they were: the backends keep their
// tls.Config, and a later admin change reuses what was built instead of
// reading the files again (which, removed meanwhile, would fail it).
func TestRefusedReloadKeepsTheUpstreamTLSSettings(t *testing.T) {
	ca := testcert.NewCA(t)
	pair := ca.Server(t, testcert.ECDSA, "b.test")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	data, err := os.ReadFile(pair.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	configOf := func(urls ...string) *config.Config {
		cfg := config.Default()
		cfg.Backends = nil
		for _, s := range urls {
			u, _ := url.Parse(s)
			cfg.Backends = append(cfg.Backends, config.Backend{URL: u, Weight: 1, TLS: config.UpstreamTLS{CAFile: caFile}})
		}
		return cfg
	}
	log := slog.New(slog.DiscardHandler)
	cfg := configOf("https://127.0.0.1:9443", "http://127.0.0.1:9080")
	up := dataplane.NewUpstreams(cfg, log)
	bs, err := buildBackends(cfg, func(n int) int { return n }, up)
	if err != nil {
		t.Fatal(err)
	}
	ctl := control.NewControl(supervisor.ConfigSource{Generation: 1}, bs, 100, log)
	ctl.Prepare = up.Plan
	tc := bs[0].TLS()

	bad := configOf("https://127.0.0.1:9443", "http://127.0.0.1:9080", "https://127.0.0.1:9444")
	bad.Backends[2].TLS.CAFile = filepath.Join(dir, "missing.pem")
	if _, err := ctl.Reloaded(supervisor.ConfigSource{Generation: 2}, poolsOf(bad), dataplane.MembersOf(bad), up.PlanUnder(bad), func() { up.Reload(bad) }); err == nil {
		t.Fatal("a reload with a missing CA file was accepted")
	}
	if bs[0].TLS() != tc {
		t.Error("the refused reload changed a backend's TLS settings")
	}
	os.Remove(caFile)
	if err := ctl.SetWeight("default", "http://127.0.0.1:9080", 5); err != nil {
		t.Errorf("an admin change after the refused reload: %v", err)
	}
	if bs[0].TLS() != tc {
		t.Error("an admin change after the refused reload rebuilt a backend's TLS settings")
	}
}

// buildBackends makes the configured backends, all healthy until checked.
// share turns a configured request cap into this process's part of it.
func buildBackends(cfg *config.Config, share func(int) int, up *dataplane.Upstreams) ([]*backend.Backend, error) {
	bs := make([]*backend.Backend, 0, len(cfg.Backends))
	for _, cb := range cfg.Backends {
		b, err := backend.New(cb.URL, cb.Weight)
		if err != nil {
			return nil, err
		}
		b.SetMaxRequests(share(cb.MaxRequests))
		if err := up.Prepare(b); err != nil {
			return nil, err
		}
		bs = append(bs, b)
	}
	return bs, nil
}
