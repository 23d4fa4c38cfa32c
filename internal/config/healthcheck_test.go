package config

import (
	"strings"
	"testing"
)

// TestGRPCHealthCheck reads health_check_type: grpc and its service, at
// the top level and in pools, which take the top level's unless they
// check another way.
func TestGRPCHealthCheck(t *testing.T) {
	c := mustParse(t, y(
		"health_check_type: grpc",
		"health_check_grpc_service: pkg.Users",
		"backends: [http://127.0.0.1:8001]",
		"pools:",
		"  same:",
		"    backends: [http://127.0.0.1:8002]",
		"  own:",
		"    health_check_grpc_service: \"\"",
		"    backends: [http://127.0.0.1:8003]",
		"  web:",
		"    health_check_type: http",
		"    backends: [http://127.0.0.1:8004]",
	))
	want := map[string]HealthCheck{
		DefaultPool: {Type: "grpc", GRPCService: "pkg.Users"},
		"same":      {Type: "grpc", GRPCService: "pkg.Users"},
		"own":       {Type: "grpc", GRPCService: ""},
		"web":       {Type: "http", GRPCService: ""},
	}
	for _, np := range c.AllPools() {
		hc := np.HealthCheck
		if w := want[np.Name]; hc.Type != w.Type || hc.GRPCService != w.GRPCService {
			t.Errorf("pool %s: type %q service %q, want %q %q", np.Name, hc.Type, hc.GRPCService, w.Type, w.GRPCService)
		}
	}
	if d := mustParse(t, "backends: [http://127.0.0.1:8001]\n"); d.HealthCheck.GRPCService != "" {
		t.Errorf("default service %q, want empty", d.HealthCheck.GRPCService)
	}
}

// TestGRPCHealthCheckProblems: a service for a check that is not grpc,
// and a type relay does not know, are errors naming the keys and lines.
func TestGRPCHealthCheckProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{name: "a service for an http check", yaml: y(
			"backends: [http://127.0.0.1:8001]",
			"health_check_type: http",
			"health_check_grpc_service: pkg.Users",
		), want: `test.yml:3: health_check_grpc_service: is set ("pkg.Users"), but health_check_type is "http" on line 2; only health_check_type: grpc asks for a service`},
		{name: "a service for the default type", yaml: y(
			"backends: [http://127.0.0.1:8001]",
			"health_check_grpc_service: pkg.Users",
		), want: `test.yml:2: health_check_grpc_service: is set ("pkg.Users"), but health_check_type is "http" by default`},
		{name: "a service for a pool's tcp check", yaml: y(
			"backends: [http://127.0.0.1:8001]",
			"pools:",
			"  db:",
			"    health_check_type: tcp",
			"    health_check_grpc_service: x",
			"    backends: [http://127.0.0.1:8002]",
		), want: `test.yml:5: pools.db.health_check_grpc_service: is set ("x"), but health_check_type is "tcp" on line 4`},
		{name: "a service too long", yaml: y(
			"backends: [http://127.0.0.1:8001]",
			"health_check_type: grpc",
			"health_check_grpc_service: "+strings.Repeat("s", 1025),
		), want: "test.yml:3: health_check_grpc_service: is 1025 bytes long; at most 1024"},
		{name: "an unknown type", yaml: y(
			"backends: [http://127.0.0.1:8001]",
			"health_check_type: gprc",
		), want: `test.yml:2: health_check_type: must be "http", "tcp" or "grpc", got "gprc"; did you mean "grpc"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "test.yml", testOpts)
			ps := problems(t, err)
			var got []string
			for _, p := range ps {
				got = append(got, p.String())
			}
			if !strings.Contains(strings.Join(got, "\n"), tt.want) {
				t.Fatalf("problems:\n%s\nwant one starting %q", strings.Join(got, "\n"), tt.want)
			}
		})
	}
}
