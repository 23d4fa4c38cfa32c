package core

import (
	"net/http"
	"strings"
	"testing"

	"relay/internal/h1"
	"relay/internal/route"
	"relay/internal/stats"
)

// gRPC calls (grpc.go) through the fake door: the status a call ended
// with, reported and counted, and relay's own answers shaped for a gRPC
// client.

// call is a unary gRPC call of method, with one empty message.
func call(method string) req {
	return req{method: "POST", target: "/shop.Items/" + method,
		fields: "Content-Type: application/grpc\r\nTE: trailers\r\n", body: "\x00\x00\x00\x00\x00"}
}

// A call's grpc-status, from the backend's head (a trailers-only answer)
// or from its chunked body's trailers, or relay's own when no backend can
// take the call, reaches the client, is in the call's access line and is
// counted by status, on the backend that answered or on the pool's
// unanswered requests; a request that is not gRPC has none.
func TestGRPCStatusLoggedAndCounted(t *testing.T) {
	tb := serving(t, "b", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/shop.Items/Find":
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "5")
			w.Header().Set("Grpc-Message", "no such item")
		case "/shop.Items/Get":
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			w.Write([]byte("\x00\x00\x00\x00\x02\x08\x01"))
			w.Header().Set("Grpc-Status", "0")
		default:
			w.Write([]byte("plain"))
		}
	})
	log := newMemLog()
	c, _ := startCore(t, Config{AccessLog: log.AccessLog}, testPool(), tb.b)
	if r := do(c, call("Find")); r.status != 200 || r.header.Get("Grpc-Status") != "5" || r.outcome.GRPCStatus != "5" {
		t.Errorf("Find: %d with grpc-status %q (reported %q), want 200 and 5", r.status, r.header.Get("Grpc-Status"), r.outcome.GRPCStatus)
	}
	if r := do(c, call("Get")); r.status != 200 || !strings.Contains(r.trailers, "Grpc-Status: 0\r\n") || r.outcome.GRPCStatus != "0" {
		t.Errorf("Get: %d with trailers %q (reported %q), want 200 and grpc-status 0", r.status, r.trailers, r.outcome.GRPCStatus)
	}
	if r := do(c, req{target: "/plain"}); r.status != 200 || r.body != "plain" || r.outcome.GRPCStatus != "" {
		t.Errorf("GET /plain: %d %q (reported %q)", r.status, r.body, r.outcome.GRPCStatus)
	}
	tb.b.SetDisabled(true)
	if r := do(c, call("Get")); r.status != 200 || r.header.Get("Grpc-Status") != "14" || r.outcome.GRPCStatus != "14" {
		t.Errorf("Get with no backend: %d with grpc-status %q, want relay's 200 and 14 UNAVAILABLE", r.status, r.header.Get("Grpc-Status"))
	}

	var got []string
	for _, l := range logLines[struct {
		Path       string
		Backend    string
		GRPCStatus *string `json:"grpc_status"`
	}](t, log) {
		gs, backend := "absent", "none"
		if l.GRPCStatus != nil {
			gs = *l.GRPCStatus
		}
		if l.Backend == tb.b.Name {
			backend = "backend"
		}
		got = append(got, l.Path+" "+backend+" grpc_status="+gs)
	}
	want := []string{
		"/shop.Items/Find backend grpc_status=5",
		"/shop.Items/Get backend grpc_status=0",
		"/plain backend grpc_status=absent",
		"/shop.Items/Get none grpc_status=14",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("access lines:\n%s\nwant:\n%s\nas written:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), log.buf.String())
	}

	var st stats.Process
	c.Stats(&st)
	var answered, own [stats.NumGRPC]uint64
	for _, b := range st.Backends {
		for i, n := range b.Requests.GRPC {
			answered[i] += n
		}
	}
	for _, p := range st.Pools {
		for i, n := range p.Unanswered.GRPC {
			own[i] += n
		}
	}
	if want := [stats.NumGRPC]uint64{0: 1, 5: 1}; answered != want {
		t.Errorf("the backend's gRPC counts %v, want one OK and one NOT_FOUND", answered)
	}
	if want := [stats.NumGRPC]uint64{14: 1}; own != want {
		t.Errorf("the pool's unanswered gRPC counts %v, want one UNAVAILABLE", own)
	}
}

// relay's own answer to a gRPC call is one a gRPC client reads: HTTP 200
// with content-type application/grpc, grpc-status and relay's message in
// grpc-message, in a head without a body; the HTTP status stays in the
// outcome. Calls refused for want of room are RESOURCE_EXHAUSTED.
func TestGRPCErrorsAreGRPCShaped(t *testing.T) {
	loop := call("Get")
	loop.fields += "Via: 1.1 relay-" + testInstance + "\r\n"
	for _, tc := range []struct {
		name   string
		set    func(t *testing.T, cfg *Config, pc *PoolConfig) []*testBackend
		r      req
		status int    // relay's HTTP status
		code   string // the grpc-status
		msg    string // relay's message, after the status text
	}{
		{"no backend up", func(t *testing.T, _ *Config, _ *PoolConfig) []*testBackend { return []*testBackend{refusing(t)} },
			call("Get"), 503, "14", "no backend is up: every one tried is unreachable"},
		{"the queue full", func(t *testing.T, _ *Config, pc *PoolConfig) []*testBackend {
			pc.MaxRequests, pc.MaxQueued = 1, 0
			tb := serving(t, "b", nil)
			tb.b.Acquire() // a request in flight: the backend is at its cap
			return []*testBackend{tb}
		}, call("Get"), 503, "8", "every backend is at its request limit and the queue is full"},
		{"over the rate limit", func(t *testing.T, cfg *Config, pc *PoolConfig) []*testBackend {
			cfg.NewLimiter, pc.RateLimit = frozenLimits(), limitOf(1, 1, RateByRoute)
			return nil
		}, call("Get"), 429, "8", "rate limit exceeded"},
		{"a loop", nil, loop, 508, "14", "the request has passed through this relay already (Via)"},
		{"the body too large", func(t *testing.T, cfg *Config, _ *PoolConfig) []*testBackend {
			cfg.MaxBodyBytes = 4
			return nil
		}, call("Get"), 413, "8", "request body larger than 4 bytes"},
		{"no route", nil, call("Nowhere"), 404, "12", "no route for this request"},
		{"a gRPC format", func(t *testing.T, _ *Config, _ *PoolConfig) []*testBackend { return []*testBackend{refusing(t)} },
			req{method: "POST", fields: "content-type: application/grpc+proto\r\n"}, 503, "14",
			"no backend is up: every one tried is unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, pc := Config{Instance: testInstance}, testPool()
			var tbs []*testBackend
			if tc.set != nil {
				tbs = tc.set(t, &cfg, &pc)
			}
			if tbs == nil {
				tbs = []*testBackend{serving(t, "b", nil)}
			}
			c, p := startCore(t, cfg, pc, tbs[0].b)
			table, err := route.New([]route.Spec{{Name: "shop", PathPrefix: "/shop.Items/Get"}, {Name: "any", Path: "/"}}, route.Reject)
			if err != nil {
				t.Fatal(err)
			}
			c.SetRouting(Routing{Table: table, Pools: []*Pool{p}})
			if tc.name == "over the rate limit" {
				do(c, tc.r) // takes the one token
			}
			hits := tbs[0].hits.Load()
			r := do(c, tc.r)
			msg := h1.StatusText(tc.status) + ": " + tc.msg
			if r.status != 200 || r.body != "" || r.header.Get("Content-Type") != "application/grpc" ||
				r.header.Get("Grpc-Status") != tc.code || r.header.Get("Grpc-Message") != msg {
				t.Errorf("%d %q, fields %q; want 200 without a body, application/grpc, grpc-status %s and grpc-message %q",
					r.status, r.body, r.header, tc.code, msg)
			}
			if r.outcome.Status != tc.status || r.outcome.GRPCStatus != tc.code || tbs[0].hits.Load() != hits {
				t.Errorf("outcome %d with grpc-status %q, the backend reached: %v; want relay's %d and %s", r.outcome.Status, r.outcome.GRPCStatus,
					tbs[0].hits.Load() != hits, tc.status, tc.code)
			}
			if r.header.Get("Retry-After") != "" || r.header.Get("Ratelimit") != "" {
				t.Errorf("fields %q; a gRPC client reads neither Retry-After nor RateLimit", r.header)
			}
		})
	}
	// A content type that only begins like gRPC's is not gRPC.
	c, _ := startPool(t, testPool(), refusing(t).b)
	if r := do(c, req{method: "POST", fields: "Content-Type: application/grpcx\r\n"}); r.status != 503 || r.retryAfter != RetryAfter {
		t.Errorf("application/grpcx: %d (Retry-After %q), want the plain 503", r.status, r.retryAfter)
	}
}
