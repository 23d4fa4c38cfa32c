package main

import (
	"fmt"
	"strings"
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"relay/internal/grpctest"
)

// TestGRPCHealthCheckTakesBackendOut: a pool checked with
// health_check_type: grpc asks its backends' gRPC health service about
// the configured service. A backend whose service turns NOT_SERVING leaves
// the pool's rotation, with the status as the logged reason, while its
// neighbour, serving, stays; it comes back once serving again. With one
// serving process and with two.
func TestGRPCHealthCheckTakesBackendOut(t *testing.T) {
	forProcesses(t, func(t *testing.T, processes int) {
		web := newBackends(t, 1)
		sick, well := grpctest.Start(t), grpctest.Start(t)
		for _, s := range []*grpctest.Server{sick, well} {
			// Overall NOT_SERVING: only a check that sends the
			// service's name passes.
			s.Health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
			s.Health.SetServingStatus("relay.Test", healthpb.HealthCheckResponse_SERVING)
		}
		cfg := fmt.Sprintf("processes: %d\naccess_log: false\n", processes) + healthYAML + backendsYAML(urlsOf(web)) +
			fmt.Sprintf("pools:\n  rpc:\n    health_check_type: grpc\n    health_check_grpc_service: relay.Test\n    backends: [%s, %s]\n", sick.URL, well.URL) +
			"routes:\n  - match: {path_prefix: /grpc.testing.}\n    pool: rpc\n"
		r, started := startRelay(t, "", "-config", writeConfig(t, cfg))
		admin := adminOf(t, started)
		// The checks before serving found both in; with several
		// processes the start line does not count them, the admin API does.
		for _, s := range []*grpctest.Server{sick, well} {
			if m := poolMember(t, admin, "rpc", s.URL); m["healthy"] != true {
				t.Fatalf("%s, SERVING relay.Test, in /api/pools after start: %v; want healthy", s.URL, m)
			}
		}

		sick.Health.SetServingStatus("relay.Test", healthpb.HealthCheckResponse_NOT_SERVING)
		outWithin := checkFall*checkInterval + checkTimeout
		l, ok := r.waitLog(outWithin+slack, transition("backend down", sick.URL))
		if !ok {
			t.Fatalf("no \"backend down\" line for %s within %v", sick.URL, outWithin+slack)
		}
		if reason := l.Str("reason"); !strings.Contains(reason, `"relay.Test"`) || !strings.Contains(reason, "status NOT_SERVING") {
			t.Errorf("backend down reason %q, want the service and status NOT_SERVING", reason)
		}
		if m := poolMember(t, admin, "rpc", sick.URL); m["healthy"] != false || m["in_rotation"] != false {
			t.Errorf("the NOT_SERVING backend in /api/pools: %v; want unhealthy, out of rotation", m)
		}
		if m := poolMember(t, admin, "rpc", well.URL); m["healthy"] != true || m["in_rotation"] != true {
			t.Errorf("the SERVING backend in /api/pools: %v; want healthy, in rotation", m)
		}

		sick.Health.SetServingStatus("relay.Test", healthpb.HealthCheckResponse_SERVING)
		backWithin := checkRise*checkInterval + checkTimeout
		if _, ok := r.waitLog(backWithin+slack, transition("backend up", sick.URL)); !ok {
			t.Fatalf("no \"backend up\" line for %s within %v", sick.URL, backWithin+slack)
		}
		if m := poolMember(t, admin, "rpc", sick.URL); m["healthy"] != true || m["in_rotation"] != true {
			t.Errorf("the backend serving again in /api/pools: %v; want healthy, in rotation", m)
		}
		r.stop()
	})
}
