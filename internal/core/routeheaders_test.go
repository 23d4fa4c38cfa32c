package core

import (
	"net/http"
	"strings"
	"testing"

	"relay/internal/route"
)

// A route's header changes (headers.go, the feature the data plane puts
// in a route's list), through the fake door.

// headersCore is a core whose route "api" (/api) changes the request's
// and the response's fields, beside its default pool, both over one
// backend that answers X-Resp-Set and X-Resp-Drop, and the trailers
// X-Resp-Drop and X-Sum.
func headersCore(t *testing.T) (*Core, *testBackend) {
	t.Helper()
	tb := serving(t, "b", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Resp-Set", "backend")
		w.Header().Set("X-Resp-Drop", "backend")
		w.Header().Set("Trailer", "X-Resp-Drop, X-Sum")
		w.Write([]byte("ok"))
		w.Header().Set("X-Resp-Drop", "trailer")
		w.Header().Set("X-Sum", "2")
	})
	c, p := startPool(t, testPool(), tb.b)
	ops := func(side string) route.HeaderOps {
		return route.HeaderOps{Set: []route.KV{{Name: "X-" + side + "-Set", Value: "relay"}},
			Add: []route.KV{{Name: "X-" + side + "-Add", Value: "one"}}, Remove: []string{"X-" + side + "-Drop"}}
	}
	table, err := route.New([]route.Spec{{Name: "api", PathPrefix: "/api"}}, route.Reject)
	if err != nil {
		t.Fatal(err)
	}
	changes := NewHeaderChanges(ops("Req"), ops("Resp"))
	c.SetRouting(Routing{Table: table, Pools: []*Pool{p}, Default: p, Features: [][]Feature{{changes}}})
	return c, tb
}

// checkFields compares the fields named in want (values joined by ",", "" for
// absent) with h's.
func checkFields(t *testing.T, who string, h http.Header, want map[string]string) {
	t.Helper()
	for name, v := range want {
		if got := strings.Join(h.Values(name), ","); got != v {
			t.Errorf("%s got %s %q, want %q", who, name, got, v)
		}
	}
}

// The route sets, adds and removes fields of the request and of the
// backend's response; requests no route takes are left as they came.
func TestRouteHeaderChanges(t *testing.T) {
	c, tb := headersCore(t)
	client := "X-Req-Set: client\r\nX-Req-Drop: client\r\nX-Req-Add: client\r\n"
	r := do(c, req{target: "/api/x", fields: client})
	if r.status != 200 || r.body != "ok" {
		t.Fatalf("%d %q", r.status, r.body)
	}
	checkFields(t, "the backend", tb.last().Header, map[string]string{"X-Req-Set": "relay", "X-Req-Drop": "", "X-Req-Add": "client,one"})
	checkFields(t, "the client", r.header, map[string]string{"X-Resp-Set": "relay", "X-Resp-Drop": "", "X-Resp-Add": "one"})

	r = do(c, req{target: "/other", fields: client})
	checkFields(t, "the backend", tb.last().Header, map[string]string{"X-Req-Set": "client", "X-Req-Drop": "client", "X-Req-Add": "client"})
	checkFields(t, "the client", r.header, map[string]string{"X-Resp-Set": "backend", "X-Resp-Drop": "backend", "X-Resp-Add": ""})
}

// A field the route removes or sets is kept out of the trailers too, both
// ways, or it would get past the route after the body to whoever reads
// trailers as header fields; other trailers pass.
func TestRouteHeaderChangesReachTheTrailers(t *testing.T) {
	c, tb := headersCore(t)
	trailers := "X-Req-Drop: t\r\nX-Req-Set: t\r\nX-Sum: 1\r\n"
	r := do(c, req{method: "POST", target: "/api/x", body: "hello", trailers: trailers})
	if r.status != 200 || r.body != "ok" {
		t.Fatalf("%d %q", r.status, r.body)
	}
	checkFields(t, "the backend's trailers", tb.last().Trailer, map[string]string{"X-Req-Drop": "", "X-Req-Set": "", "X-Sum": "1"})
	if !strings.Contains(r.trailers, "X-Sum: 2") || strings.Contains(strings.ToLower(r.trailers), "x-resp-drop") {
		t.Errorf("the client's trailers %q, want X-Sum and not X-Resp-Drop", r.trailers)
	}

	r = do(c, req{method: "POST", target: "/other", body: "hello", trailers: trailers})
	checkFields(t, "the backend's trailers", tb.last().Trailer, map[string]string{"X-Req-Drop": "t", "X-Req-Set": "t", "X-Sum": "1"})
	if !strings.Contains(r.trailers, "X-Resp-Drop: trailer") {
		t.Errorf("without the route the client's trailers are %q, want X-Resp-Drop", r.trailers)
	}
}
