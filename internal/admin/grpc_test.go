package admin

import (
	"net"
	"regexp"
	"strings"
	"testing"

	"relay/internal/control"
	"relay/internal/stats"
	"relay/internal/supervisor"
)

// attachCounting attaches serving process i to a's control, answering its
// collects with what read returns, as a serving process would.
func attachCounting(t *testing.T, a *testAdmin, i int, read func() *stats.Process) {
	t.Helper()
	f, err := a.ctl.Attach(i)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p, err := supervisor.Attached(i, nil, c)
	if err != nil {
		t.Fatalf("attaching process %d: %v", i, err)
	}
	if err := control.Follow(p, nil, control.Updates{Stats: read}); err != nil {
		t.Fatal(err)
	}
}

// grpcProcess is what one serving process counted: n OK and n/2
// NOT_FOUND answers from the default pool's first backend, one answer with
// a grpc-status gRPC does not define, and n/3 UNAVAILABLE answers of
// relay's own when no backend could take a call.
func grpcProcess(n uint64) *stats.Process {
	var answered, own stats.Counts
	answered.Responses[2][1] = n + n/2 + 1 // POST, 2xx: gRPC answers in HTTP 200
	answered.Latency[0] = n + n/2 + 1
	answered.GRPC[0], answered.GRPC[5], answered.GRPC[stats.NumGRPC-1] = n, n/2, 1
	own.Responses[2][1], own.Latency[0] = n/3, n/3
	own.GRPC[14] = n / 3
	return &stats.Process{
		Backends: []stats.Backend{
			{Pool: "default", Name: poolURLs[0], Served: n + n/2 + 1, Requests: answered},
			{Pool: "default", Name: poolURLs[1]},
		},
		Pools: []stats.Pool{{Name: "default", Unanswered: own}},
	}
}

// TestGRPCCountsInMetricsAndAPI: /metrics has one gRPC series per pool,
// backend and grpc-status that was seen, summed exactly over the serving
// processes, relay's own answers under backend "none"; the JSON API gives
// each backend's, the pool's totals and relay's own by grpc-status.
func TestGRPCCountsInMetricsAndAPI(t *testing.T) {
	a := newAdmin(t, Options{})
	attachCounting(t, a, 0, func() *stats.Process { return grpcProcess(6) })
	attachCounting(t, a, 1, func() *stats.Process { return grpcProcess(12) })

	got := a.call(t, "GET", "/metrics", "")
	if got.code != 200 {
		t.Fatalf("GET /metrics: %d %s", got.code, got.short())
	}
	series := regexp.MustCompile(`(?m)^relay_grpc_responses_total\{.*$`).FindAllString(got.raw, -1)
	want := []string{
		`relay_grpc_responses_total{backend="http://127.0.0.1:8001",grpc_status="0",pool="default"} 18`,
		`relay_grpc_responses_total{backend="http://127.0.0.1:8001",grpc_status="5",pool="default"} 9`,
		`relay_grpc_responses_total{backend="http://127.0.0.1:8001",grpc_status="other",pool="default"} 2`,
		`relay_grpc_responses_total{backend="none",grpc_status="14",pool="default"} 6`,
	}
	if strings.Join(series, "\n") != strings.Join(want, "\n") {
		t.Errorf("gRPC series:\n%s\nwant:\n%s", strings.Join(series, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(got.raw, "# TYPE relay_grpc_responses_total counter") {
		t.Errorf("relay_grpc_responses_total is not a counter:\n%s", got.raw)
	}

	got = a.call(t, "GET", "/api/backends", "")
	if got.code != 200 {
		t.Fatalf("GET /api/backends: %d %s", got.code, got.short())
	}
	backends := got.body["backends"].([]any)
	grpcOf := func(v any) map[string]any {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("grpc is %#v, want an object", v)
		}
		return m
	}
	check := func(what string, got map[string]any, want map[string]float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s[%q] = %v, want %v (all: %v)", what, k, got[k], n, got)
			}
		}
	}
	check("first backend's grpc", grpcOf(backends[0].(map[string]any)["grpc"]), map[string]float64{"0": 18, "5": 9, "other": 2})
	check("second backend's grpc", grpcOf(backends[1].(map[string]any)["grpc"]), nil)
	totals := got.body["totals"].(map[string]any)
	check("totals' grpc", grpcOf(totals["grpc"]), map[string]float64{"0": 18, "5": 9, "other": 2, "14": 6})
	check("totals' no_backend_grpc", grpcOf(totals["no_backend_grpc"]), map[string]float64{"14": 6})
}
