package config

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestProtocolProblems: every bad upstream protocol and gRPC setting,
// at the top level, in a named pool and on a backend, is one problem on
// its key and line.
func TestProtocolProblems(t *testing.T) {
	const b1 = "  - url: http://127.0.0.1:8001"
	const tls1 = "  - url: https://127.0.0.1:8443"
	checkProblems(t, []problemCase{
		// protocol's values.
		{"unknown protocol", y("protocol: h3", "backends:", b1), 1, "protocol", `"h3" is not one of http/1.1, h2, h2c`},
		{"protocol http2", y("protocol: http2", "backends:", tls1), 1, "protocol", `"http2" is not one of http/1.1, h2, h2c; did you mean "h2"?`},
		{"protocol upper case", y("protocol: HTTP/1.1", "backends:", b1), 1, "protocol", `did you mean "http/1.1"?`},
		{"protocol empty", y(`protocol: ""`, "backends:", b1), 1, "protocol", `"" is not one of http/1.1, h2, h2c`},
		{"protocol not a string", y("protocol: [h2]", "backends:", b1), 1, "protocol", "must be a string, got a list"},
		{"backend protocol unknown", y("backends:", b1, "    protocol: h2x"), 3, "backends[0].protocol", `"h2x" is not one of http/1.1, h2, h2c; did you mean "h2"?`},
		{"backend protocol not a string", y("backends:", b1, "    protocol: 2"), 3, "backends[0].protocol", `must be a string, got "2"`},
		{"pool protocol unknown", y("pools:", "  api:", "    backends: [http://127.0.0.1:8001]", "    protocol: grpc"), 4, "pools.api.protocol", `"grpc" is not one of http/1.1, h2, h2c`},

		// protocol against the backend's scheme.
		{"backend h2c on https", y("backends:", tls1, "    weight: 2", "    protocol: h2c"), 4, "backends[0].protocol", `protocol h2c needs an http:// backend, "https://127.0.0.1:8443" is not`},
		{"backend h2 on http", y("backends:", b1, "    protocol: h2"), 3, "backends[0].protocol", `protocol h2 needs an https:// backend, "http://127.0.0.1:8001" is not`},
		{"top h2 on an http backend", y("protocol: h2", "backends:", tls1, b1), 4, "backends[1].url", `protocol h2 (protocol, line 1) needs an https:// backend, "http://127.0.0.1:8001" is not`},
		{"top h2c on a bare https backend", y("protocol: h2c", "backends:", "  - https://127.0.0.1:8443"), 3, "backends[0].url", `protocol h2c (protocol, line 1) needs an http:// backend, "https://127.0.0.1:8443" is not`},
		{"pool h2c on https", y("pools:", "  api:", "    protocol: h2c", "    backends: [https://127.0.0.1:8443]"), 4, "pools.api.backends[0].url", `protocol h2c (pools.api.protocol, line 3) needs an http:// backend`},
		{"pool takes h2 from the top", y("protocol: h2", "backends: [https://127.0.0.1:8443]", "pools:", "  api:", "    backends:", "      - url: http://127.0.0.1:8001"), 6, "pools.api.backends[0].url", `protocol h2 (protocol, line 1) needs an https:// backend, "http://127.0.0.1:8001" is not`},

		// breaker_grpc_statuses.
		{"grpc status too large", y("breaker_grpc_statuses: [14, 17]", "backends:", b1), 1, "breaker_grpc_statuses", "17 is not a gRPC status (0-16; 14 is UNAVAILABLE)"},
		{"grpc status negative", y("breaker_grpc_statuses: [-1]", "backends:", b1), 1, "breaker_grpc_statuses", "-1 is not a gRPC status"},
		{"grpc status an HTTP status", y("pools:", "  api:", "    backends: [http://127.0.0.1:8001]", "    breaker_grpc_statuses: [503]"), 4, "pools.api.breaker_grpc_statuses", "503 is not a gRPC status"},
		{"grpc statuses not a list", y("breaker_grpc_statuses: 14", "backends:", b1), 1, "breaker_grpc_statuses", `must be a list of gRPC statuses (0-16) such as [14], got "14"`},
		{"grpc status a name", y("breaker_grpc_statuses: [UNAVAILABLE]", "backends:", b1), 1, "breaker_grpc_statuses[0]", `must be a whole number, got "UNAVAILABLE"`},

		// max_grpc_timeout.
		{"grpc timeout negative", y("max_grpc_timeout: -1s", "backends:", b1), 1, "max_grpc_timeout", "must not be negative (0 leaves grpc-timeout uncapped), got -1s"},
		{"grpc timeout not a duration", y("max_grpc_timeout: soon", "backends:", b1), 1, "max_grpc_timeout", `"soon": not a duration`},
		{"pool grpc timeout negative", y("pools:", "  api:", "    backends: [http://127.0.0.1:8001]", "    max_grpc_timeout: -5s"), 4, "pools.api.max_grpc_timeout", "must not be negative"},
	})
}

// TestProtocolsAccepted: each protocol with the scheme it needs, a
// backend's own protocol winning over its pool's, and http/1.1 on
// either scheme.
func TestProtocolsAccepted(t *testing.T) {
	for name, text := range map[string]string{
		"h2 to https":                 y("protocol: h2", "backends: [https://127.0.0.1:8443]"),
		"h2c to http":                 y("protocol: h2c", "backends: [http://127.0.0.1:8001]"),
		"http/1.1 to both":            y("protocol: http/1.1", "backends: [http://127.0.0.1:8001, https://127.0.0.1:8443]"),
		"backend overrides the pool":  y("protocol: h2", "backends:", "  - https://127.0.0.1:8443", "  - url: http://127.0.0.1:8001", "    protocol: h2c"),
		"pool overrides the top":      y("protocol: h2", "backends: [https://127.0.0.1:8443]", "pools:", "  api:", "    protocol: h2c", "    backends: [http://127.0.0.1:8001]"),
		"no grpc statuses":            y("breaker_grpc_statuses: []", "backends: [http://127.0.0.1:8001]"),
		"every grpc status in bounds": y("breaker_grpc_statuses: [0, 16]", "max_grpc_timeout: 0", "backends: [http://127.0.0.1:8001]"),
	} {
		t.Run(name, func(t *testing.T) { mustParse(t, text) })
	}
}

// TestProtocolsFallBack: the defaults, and each key a named pool does not
// set taken from the top level; a backend without a protocol of its own
// speaks its pool's.
func TestProtocolsFallBack(t *testing.T) {
	d := mustParse(t, y("backends: [http://127.0.0.1:8001]"))
	if d.Protocol != "http/1.1" || !slices.Equal(d.BreakerGRPCStatuses, []int{14}) || d.MaxGRPCTimeout != 0 {
		t.Errorf("defaults: protocol %q, breaker_grpc_statuses %v, max_grpc_timeout %v; want http/1.1, [14], 0",
			d.Protocol, d.BreakerGRPCStatuses, d.MaxGRPCTimeout)
	}
	c := mustParse(t, y(
		"protocol: h2c",
		"breaker_grpc_statuses: [14, 4]",
		"max_grpc_timeout: 30s",
		"backends: [http://127.0.0.1:8001]",
		"pools:",
		"  web:",
		"    backends: [http://127.0.0.1:8002]",
		"  api:",
		"    protocol: h2",
		"    breaker_grpc_statuses: []",
		"    max_grpc_timeout: 2s",
		"    backends:",
		"      - https://127.0.0.1:8443",
		"      - url: http://127.0.0.1:8003",
		"        protocol: h2c",
		"      - url: http://127.0.0.1:8004",
		"        protocol: http/1.1",
	))
	web, api := c.Pools["web"], c.Pools["api"]
	tests := []struct {
		name      string
		got, want any
	}{
		{"top protocol", c.Protocol, "h2c"},
		{"top backend", c.BackendProtocol(c.Backends[0]), "h2c"},
		{"web protocol", web.Protocol, "h2c"},
		{"web backend", web.BackendProtocol(web.Backends[0]), "h2c"},
		{"web grpc statuses", web.BreakerGRPCStatuses, []int{14, 4}},
		{"web grpc timeout", web.MaxGRPCTimeout, 30 * time.Second},
		{"api protocol", api.Protocol, "h2"},
		{"api backend of the pool's", api.BackendProtocol(api.Backends[0]), "h2"},
		{"api backend h2c", api.BackendProtocol(api.Backends[1]), "h2c"},
		{"api backend http/1.1", api.BackendProtocol(api.Backends[2]), "http/1.1"},
		{"api grpc statuses", api.BreakerGRPCStatuses, []int{}},
		{"api grpc timeout", api.MaxGRPCTimeout, 2 * time.Second},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
	// A named pool's copy of the top level's statuses is its own.
	web.BreakerGRPCStatuses[0] = 2
	if c.BreakerGRPCStatuses[0] != 14 {
		t.Errorf("a pool's breaker_grpc_statuses share the top level's array")
	}
}

// TestProtocolsReloadLive: a changed protocol, a backend's, the gRPC
// breaker statuses and the gRPC timeout cap are changes a reload
// applies, at the top level and in a pool, and nothing a restart must.
func TestProtocolsReloadLive(t *testing.T) {
	base := []string{"backends: [http://127.0.0.1:8001]", "pools:", "  a:", "    backends: [http://127.0.0.1:8002]"}
	a := mustParse(t, y(base...))
	tests := []struct {
		name    string
		lines   []string
		changed []string
	}{
		{"top protocol", append([]string{"protocol: h2c"}, base...), []string{"protocol", "pools"}},
		{"backend protocol", []string{"backends:", "  - url: http://127.0.0.1:8001", "    protocol: h2c", "pools:", "  a:", "    backends: [http://127.0.0.1:8002]"}, nil},
		{"pool protocol", append(base, "    protocol: h2c"), []string{"pools"}},
		{"grpc statuses", append([]string{"breaker_grpc_statuses: [14, 13]"}, base...), []string{"pools", "breaker_grpc_statuses"}},
		{"grpc timeout", append([]string{"max_grpc_timeout: 10s"}, base...), []string{"max_grpc_timeout", "pools"}},
		{"pool grpc timeout", append(base, "    max_grpc_timeout: 10s"), []string{"pools"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustParse(t, y(tt.lines...))
			got := Changed(a, b)
			slices.Sort(got)
			slices.Sort(tt.changed)
			if !slices.Equal(got, tt.changed) {
				t.Errorf("Changed = %v, want %v", got, tt.changed)
			}
			if ro := RestartOnly(a, b); len(ro) != 0 {
				t.Errorf("RestartOnly = %v, want none: a reload applies them", ro)
			}
		})
	}
	for _, k := range []string{"protocol", "breaker_grpc_statuses", "max_grpc_timeout"} {
		if !slices.Contains(LiveKeys, k) {
			t.Errorf("%s is not in LiveKeys", k)
		}
	}
}
