package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPoolsFallBackToTheTopLevel: a named pool holds every key it sets,
// and the top level's value of every key it leaves out, backends
// excepted; the pools are listed in the order of the file.
func TestPoolsFallBackToTheTopLevel(t *testing.T) {
	c := mustParse(t, y(
		"algorithm: least-conn",
		"retries: 4",
		"health_check_path: /up",
		"health_check_interval: 5s",
		"breaker_statuses: [502]",
		"backend_tls_server_name: top.internal",
		"pools:",
		"  web:",
		"    backends: [http://127.0.0.1:8001, http://127.0.0.1:8002]",
		"  api:",
		"    algorithm: p2c",
		"    retries: 0",
		"    health_check_interval: 1s",
		"    breaker_statuses: [503, 504]",
		"    backend_tls_ca_file: \"\"",
		"    slow_start: 30s",
		"    backends:",
		"      - url: http://127.0.0.1:8001",
		"        weight: 3",
	))
	if got, want := c.PoolNames, []string{"web", "api"}; !slices.Equal(got, want) {
		t.Fatalf("PoolNames = %v, want %v", got, want)
	}
	web, api := c.Pools["web"], c.Pools["api"]
	tests := []struct {
		name      string
		got, want any
	}{
		{"web algorithm", web.Algorithm, "least-conn"},
		{"web retries", web.Retries, 4},
		{"web health path", web.HealthCheck.Path, "/up"},
		{"web interval", web.HealthCheck.Interval, 5 * time.Second},
		{"web timeout", web.HealthCheck.Timeout, DefaultHealthCheckTimeout},
		{"web statuses", web.BreakerStatuses, []int{502}},
		{"web tls", web.BackendTLS.ServerName, "top.internal"},
		{"web backends", len(web.Backends), 2},
		{"api algorithm", api.Algorithm, "p2c"},
		{"api retries", api.Retries, 0},
		{"api health path", api.HealthCheck.Path, "/up"},
		{"api interval", api.HealthCheck.Interval, time.Second},
		{"api timeout follows its interval", api.HealthCheck.Timeout, 500 * time.Millisecond},
		{"api statuses", api.BreakerStatuses, []int{503, 504}},
		{"api tls set empty keeps the top's other keys", api.BackendTLS.ServerName, "top.internal"},
		{"api slow start", api.SlowStart, 30 * time.Second},
		{"api backend", api.Backends[0].URL.String(), "http://127.0.0.1:8001"},
		{"api weight", api.Backends[0].Weight, 3},
		{"api backend key", api.Backends[0].key, "pools.api.backends[0]"},
		{"top level has no backends", len(c.Backends), 0},
		{"no default pool", c.HasDefaultPool(), false},
		{"lookup default", c.LookupPool(DefaultPool) == nil, true},
		{"lookup api", c.LookupPool("api") == api, true},
		{"lookup none", c.LookupPool("nope") == nil, true},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	var names []string
	for _, np := range c.AllPools() {
		names = append(names, np.Name)
	}
	if want := []string{"web", "api"}; !slices.Equal(names, want) {
		t.Errorf("AllPools = %v, want %v (no default: the top level has no backends)", names, want)
	}

	// A pool that sets no algorithm follows -algorithm; one that sets
	// its own keeps it.
	if err := c.Apply(Overlay{Algorithm: "random", Backends: []string{"http://127.0.0.1:9000"}}, testOpts); err != nil {
		t.Fatal(err)
	}
	if c.Pools["web"].Algorithm != "random" || c.Pools["api"].Algorithm != "p2c" {
		t.Errorf("after -algorithm random: web %s, api %s; want random, p2c", c.Pools["web"].Algorithm, c.Pools["api"].Algorithm)
	}
	names = names[:0]
	for _, np := range c.AllPools() {
		names = append(names, np.Name)
	}
	if want := []string{DefaultPool, "web", "api"}; !slices.Equal(names, want) {
		t.Errorf("AllPools with -backends = %v, want %v", names, want)
	}
}

// TestPoolProblems: every check of the top level's pool keys runs for
// each named pool, located at the pool's own key; and the section's own
// rules (names, backends of its own, no key that is not a pool's).
func TestPoolProblems(t *testing.T) {
	const b1 = "    backends: [http://127.0.0.1:8001]"
	tests := []struct {
		name string
		yaml string
		want []string // each one problem, in order
	}{
		{"pool retries", y("pools:", "  api:", b1, "    retries: 9"),
			[]string{"test.yml:4: pools.api.retries: must be between 0 and 7, got 9"}},
		{"pool algorithm", y("pools:", "  api:", b1, "    algorithm: least_conn"),
			[]string{`test.yml:4: pools.api.algorithm: unknown algorithm "least_conn"; did you mean "least-conn"?`}},
		{"pool timeout against its interval", y("pools:", "  api:", b1, "    health_check_interval: 1s", "    health_check_timeout: 1s"),
			[]string{"test.yml:5: pools.api.health_check_timeout: health_check_timeout (1s) must be shorter than health_check_interval (1s)"}},
		{"pool duration", y("pools:", "  api:", b1, "    queue_timeout: soon"),
			[]string{`test.yml:4: pools.api.queue_timeout: "soon": not a duration`}},
		{"bad top value reported once", y("retries: 9", "pools:", "  api:", b1),
			[]string{"test.yml:1: retries: must be between 0 and 7, got 9"}},
		{"inherited value bad only for this pool", y("breaker_failures: 0", "breaker_open_time: 0", "pools:", "  api:", b1, "    breaker_failures: 3"),
			[]string{"test.yml:4: pools.api.breaker_open_time: must be longer than zero (pool api takes breaker_open_time from the top level; set it in the pool to change it)"}},
		{"default reserved", y("backends: [http://127.0.0.1:8001]", "pools:", "  default:", b1),
			[]string{`test.yml:3: pools.default: "default" is the name of the top level's pool`}},
		{"bad name", y("pools:", "  API:", b1),
			[]string{`test.yml:2: pools.API: pool names are 1 to 64 of a-z, 0-9, _ and -, starting with a letter or digit (they become metric labels), got "API"`}},
		{"name too long", y("pools:", "  "+strings.Repeat("a", 65)+":", b1),
			[]string{"test.yml:2: pools.aaaa"}},
		{"twice", y("pools:", "  api:", b1, "  api:", b1),
			[]string{`test.yml:4: pools.api: pool "api" is defined twice (first at line 2)`}},
		{"not a mapping", y("pools: [api]"),
			[]string{"test.yml:1: pools: must be a mapping from pool names to their settings"}},
		{"pool not a mapping", y("pools:", "  api: http://127.0.0.1:8001"),
			[]string{`test.yml:2: pools.api: must be a mapping of pool settings (backends:, algorithm:, ...), got "http://127.0.0.1:8001"`}},
		{"no backends", y("pools:", "  api:", "    retries: 1"),
			[]string{"test.yml:2: pools.api.backends: no backends configured; list at least one (- url: http://HOST:PORT): a pool's backends are its own"}},
		{"empty pool", y("pools:", "  api:"),
			[]string{"test.yml:2: pools.api.backends: no backends configured"}},
		{"duplicate in one pool", y("pools:", "  api:", "    backends:", "      - http://127.0.0.1:8001", "      - http://LOCALHOST:8002", "      - http://127.0.0.1:8001/"),
			[]string{`test.yml:6: pools.api.backends[2].url: "http://127.0.0.1:8001/" duplicates the backend at line 4 (both are http://127.0.0.1:8001)`}},
		{"bad backend", y("pools:", "  api:", "    backends:", "      - url: localhost:8001", "        weight: 0"),
			[]string{`test.yml:4: pools.api.backends[0].url: "localhost:8001" has no scheme; write "http://localhost:8001"`}},
		{"bad weight", y("pools:", "  api:", "    backends:", "      - url: http://127.0.0.1:8001", "        weight: 0"),
			[]string{"test.yml:5: pools.api.backends[0].weight: weight 0 is below 1"}},
		{"tls on http backend", y("pools:", "  api:", "    backends:", "      - url: http://127.0.0.1:8001", "        tls_server_name: x"),
			[]string{"test.yml:5: pools.api.backends[0].tls_server_name: tls_server_name applies to https backends only; this one is http"}},
		{"typo", y("pools:", "  api:", b1, "    retires: 1"),
			[]string{`test.yml:4: pools.api.retires: unknown key; did you mean "retries"?`}},
		{"relay's own key", y("pools:", "  api:", b1, "    listen: :8080"),
			[]string{"test.yml:4: pools.api.listen: not a pool setting: it applies to relay as a whole; move it to the top level"}},
		{"backend key", y("pools:", "  api:", b1, "    weight: 2"),
			[]string{"test.yml:4: pools.api.weight: unknown key in a pool; it belongs to a backend"}},
		{"tls key", y("pools:", "  api:", b1, "    tls_ca_file: ca.pem"),
			[]string{`test.yml:4: pools.api.tls_ca_file: unknown key in a pool; did you mean "backend_tls_ca_file"`}},
		{"top-level key in a pool's backend", y("pools:", "  api:", "    backends:", "      - url: http://127.0.0.1:8001", "        retries: 2"),
			[]string{"test.yml:5: pools.api.backends[0].retries: unknown key in a backend; it is a top-level setting"}},
		{"cap below the processes", y("processes: 4", "pools:", "  api:", b1, "    backend_max_requests: 2"),
			[]string{"test.yml:5: pools.api.backend_max_requests: 2 cannot be split over 4 serving processes"}},
		{"no pools and no backends", y("retries: 1"),
			[]string{"test.yml: backends: no backends configured; list at least one"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "test.yml", testOpts)
			ps := problems(t, err)
			if len(ps) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(ps[i].String(), w) {
					t.Errorf("problem %d:\n got  %s\n want %s...", i, ps[i], w)
				}
			}
		})
	}
}

// TestPoolsAccepted: one address may serve in several pools; a named
// pool may be empty when discovery can fill it; the top level may list
// no backends once pools are given.
func TestPoolsAccepted(t *testing.T) {
	for name, text := range map[string]string{
		"one address in two pools": y("pools:", "  a:", "    backends: [http://127.0.0.1:8001]", "  b:", "    backends: [http://127.0.0.1:8001]"),
		"empty pool with discovery": y("discovery:", "  etcd:", "    endpoints: [http://127.0.0.1:2379]", "    prefix: /relay/backends/",
			"pools:", "  a:", "    retries: 1"),
		"top level and pools":    y("backends: [http://127.0.0.1:8001]", "pools:", "  a:", "    backends: [http://127.0.0.1:8001]"),
		"empty value falls back": y("retries: 5", "pools:", "  a:", "    retries:", "    backends: [http://127.0.0.1:8001]"),
	} {
		t.Run(name, func(t *testing.T) {
			c := mustParse(t, text)
			if name == "empty value falls back" && c.Pools["a"].Retries != 5 {
				t.Errorf("retries: with no value = %d, want the top level's 5", c.Pools["a"].Retries)
			}
		})
	}
}

// TestChangedPools: a changed pool, a pool added or removed, is the key
// pools, which a reload applies; a top-level key a pool takes changes
// that pool too; pools moved to other lines are unchanged.
func TestChangedPools(t *testing.T) {
	base := []string{"retries: 1", "pools:", "  a:", "    backends: [http://127.0.0.1:8001]", "  b:", "    backends: [http://127.0.0.1:8002]"}
	a := mustParse(t, y(base...))
	tests := []struct {
		name        string
		lines       []string
		changed     []string
		restartOnly []string
	}{
		{"moved", append([]string{"# comment"}, base...), nil, nil},
		{"pool setting", []string{"retries: 1", "pools:", "  a:", "    backends: [http://127.0.0.1:8001]", "    slow_start: 5s", "  b:", "    backends: [http://127.0.0.1:8002]"}, []string{"pools"}, nil},
		{"pool backend", []string{"retries: 1", "pools:", "  a:", "    backends: [http://127.0.0.1:8003]", "  b:", "    backends: [http://127.0.0.1:8002]"}, []string{"pools"}, nil},
		{"pool removed", []string{"retries: 1", "pools:", "  a:", "    backends: [http://127.0.0.1:8001]"}, []string{"pools"}, nil},
		{"order", []string{"retries: 1", "pools:", "  b:", "    backends: [http://127.0.0.1:8002]", "  a:", "    backends: [http://127.0.0.1:8001]"}, []string{"pools"}, nil},
		{"inherited", append([]string{"retries: 2"}, base[1:]...), []string{"pools", "retries"}, nil},
		{"inherited health check", append([]string{"health_check_path: /up"}, base...), []string{"pools", "health_check_path"}, []string{"health_check_path"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustParse(t, y(tt.lines...))
			if got := Changed(a, b); !slices.Equal(got, tt.changed) {
				t.Errorf("Changed = %v, want %v", got, tt.changed)
			}
			if got := RestartOnly(a, b); !slices.Equal(got, tt.restartOnly) {
				t.Errorf("RestartOnly = %v, want %v", got, tt.restartOnly)
			}
		})
	}
}

// TestPoolWeightsWarning: weights that differ under an algorithm that
// ignores them are a warning in a named pool too, on its backend.
func TestPoolWeightsWarning(t *testing.T) {
	opts := testOpts
	opts.IgnoringWeights = []string{"random", "round-robin"}
	c := mustParse(t, y("pools:", "  api:", "    backends:", "      - http://127.0.0.1:8001", "      - url: http://127.0.0.1:8002", "        weight: 3",
		"routes:", "  - pool: api"))
	ws := c.Warnings(opts)
	want := "test.yml:6: warning: pools.api.backends[1].weight: weight 3 differs from the first backend's (1), but algorithm round-robin (the default) ignores them"
	if len(ws) != 1 || !strings.HasPrefix(ws[0].Warning(), want) {
		t.Fatalf("warnings %v, want one starting %q", ws, want)
	}
}
