package dataplane

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"relay/internal/config"
	"relay/internal/core"
)

const protocolsYAML = `protocol: h2c
breaker_grpc_statuses: [14, 4]
max_grpc_timeout: 20s
idle_timeout: 45s
backends:
  - http://LOCALHOST:8001
  - url: https://127.0.0.1
    protocol: h2
  - url: http://127.0.0.1:8002
    protocol: h2c
  - url: http://[::1]:08003
    protocol: http/1.1
pools:
  api:
    protocol: http/1.1
    max_grpc_timeout: 0s
    backends: [http://127.0.0.1:9001]
routes:
  - match: {path_prefix: /api}
    pool: api
`

// TestPoolConfigOfProtocolsAndGRPC: the core gets each pool's protocol,
// the protocols of the backends that differ from it under the names the
// members have, the gRPC breaker statuses and timeout cap, named pools
// taking what they leave out from the top level; and the client
// idle_timeout bounds idle streams to HTTP/2 backends.
func TestPoolConfigOfProtocolsAndGRPC(t *testing.T) {
	cfg, err := config.Parse([]byte(protocolsYAML), "test.yml", config.Options{Algorithms: []string{"round-robin"}})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	def := poolConfigOf(DefaultPool, cfg.LookupPool(DefaultPool), nil)
	wantBackends := map[string]core.Protocol{"https://127.0.0.1:443": core.H2, "http://[::1]:8003": core.HTTP1}
	if def.Protocol != core.H2C || !reflect.DeepEqual(def.BackendProtocols, wantBackends) ||
		!slices.Equal(def.BreakerGRPCStatuses, []int{14, 4}) || def.MaxGRPCTimeout != 20*time.Second {
		t.Errorf("default pool: protocol %v, backends %v, gRPC statuses %v, timeout %v; want h2c, %v, [14 4], 20s",
			def.Protocol, def.BackendProtocols, def.BreakerGRPCStatuses, def.MaxGRPCTimeout, wantBackends)
	}
	// The map's names are the members' names.
	var names []string
	for _, b := range pl.Backends() {
		if b.Pool == DefaultPool {
			names = append(names, b.Name)
		}
	}
	for name := range def.BackendProtocols {
		if !slices.Contains(names, name) {
			t.Errorf("BackendProtocols names %s; the pool's members are %v", name, names)
		}
	}
	api := poolConfigOf("api", cfg.LookupPool("api"), nil)
	if api.Protocol != core.HTTP1 || api.BackendProtocols != nil ||
		!slices.Equal(api.BreakerGRPCStatuses, []int{14, 4}) || api.MaxGRPCTimeout != 0 {
		t.Errorf("pool api: protocol %v, backends %v, gRPC statuses %v, timeout %v; want http/1.1, none, [14 4] from the top level, 0",
			api.Protocol, api.BackendProtocols, api.BreakerGRPCStatuses, api.MaxGRPCTimeout)
	}
	if got := pl.coreConfig(cfg).StreamIdleTimeout; got != 45*time.Second {
		t.Errorf("StreamIdleTimeout = %v, want idle_timeout's 45s", got)
	}

	plain, err := config.Parse([]byte("backends: [http://127.0.0.1:8001]\n"), "test.yml", config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pc := poolConfigOf(DefaultPool, &plain.Pool, nil); pc.Protocol != core.HTTP1 || pc.BackendProtocols != nil ||
		!slices.Equal(pc.BreakerGRPCStatuses, []int{14}) || pc.MaxGRPCTimeout != 0 {
		t.Errorf("defaults: protocol %v, backends %v, gRPC statuses %v, timeout %v; want http/1.1, none, [14], 0",
			pc.Protocol, pc.BackendProtocols, pc.BreakerGRPCStatuses, pc.MaxGRPCTimeout)
	}
}

// TestExplainNamesTheProtocol: relay -explain says what a pool speaks to
// its backends when it is not HTTP/1.1, and which backends differ.
func TestExplainNamesTheProtocol(t *testing.T) {
	cfg, err := config.Parse([]byte(protocolsYAML), "test.yml", config.Options{Algorithms: []string{"round-robin"}})
	if err != nil {
		t.Fatal(err)
	}
	text, _, err := Explain(cfg, "GET", "/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pool default speaks h2c to its backends", "backend https://127.0.0.1:443 speaks h2", "backend http://[::1]:8003 speaks http/1.1"} {
		if !strings.Contains(text, want) {
			t.Errorf("explain of /x does not say %q:\n%s", want, text)
		}
	}
	text, _, err = Explain(cfg, "GET", "/api/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "speaks") {
		t.Errorf("explain of a request to an HTTP/1.1 pool names a protocol:\n%s", text)
	}
}
