package core

import (
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"relay/internal/route"
)

// Request ids (requestid.go), through the fake door.

// madeID is an id relay makes: a per-process prefix and a counter.
var madeID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// echoingID is a backend that answers with an X-Request-Id of its own:
// the client must get relay's instead.
func echoingID(t *testing.T) *testBackend {
	return serving(t, "b", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Request-Id", "backend-made")
	})
}

// With request ids on, every request reaches the backend with exactly one
// X-Request-Id and the client gets the same one back; a trusted proxy's
// well-formed id is kept, anyone else's is replaced.
func TestRequestIDs(t *testing.T) {
	tests := []struct {
		name    string
		trusted []netip.Prefix
		fields  string // extra request fields
		keep    string // the id the backend should get; "" means one relay made
	}{
		{name: "none sent: relay makes one"},
		{name: "a client's is replaced", fields: "X-Request-Id: chosen-by-client\r\n"},
		{name: "a trusted proxy's is kept", trusted: loopback, fields: "X-Request-Id: edge-42.abc_DEF:7\r\n", keep: "edge-42.abc_DEF:7"},
		{name: "a trusted proxy's first is kept", trusted: loopback, fields: "X-Request-Id: first\r\nX-Request-Id: second\r\n", keep: "first"},
		{name: "a trusted proxy's with a space is replaced", trusted: loopback, fields: "X-Request-Id: a b\r\n"},
		{name: "a trusted proxy's longer than 200 bytes is replaced", trusted: loopback, fields: "X-Request-Id: " + strings.Repeat("x", 201) + "\r\n"},
		{name: "a trusted proxy's of 200 bytes is kept", trusted: loopback, fields: "X-Request-Id: " + strings.Repeat("y", 200) + "\r\n", keep: strings.Repeat("y", 200)},
		{name: "a trusted proxy's past ASCII is replaced", trusted: loopback, fields: "X-Request-Id: caf\xc3\xa9\r\n"},
		{name: "a trusted proxy's empty one is replaced", trusted: loopback, fields: "X-Request-Id: \r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := echoingID(t)
			c, _ := startCore(t, Config{TrustedProxies: tt.trusted, RequestID: true}, testPool(), tb.b)
			seen := map[string]bool{}
			for range 2 {
				r := do(c, req{fields: tt.fields})
				if r.status != 200 {
					t.Fatalf("%d %q", r.status, r.body)
				}
				sent := tb.last().Header["X-Request-Id"]
				if len(sent) != 1 {
					t.Fatalf("the backend got X-Request-Id %q, want exactly one", sent)
				}
				id := sent[0]
				switch {
				case tt.keep != "" && id != tt.keep:
					t.Errorf("the backend got id %q, want the trusted proxy's %q", id, tt.keep)
				case tt.keep == "" && !madeID.MatchString(id):
					t.Errorf("the backend got id %q, want one relay made (32 hex digits)", id)
				}
				if got := r.header["X-Request-Id"]; len(got) != 1 || got[0] != id {
					t.Errorf("the client got X-Request-Id %q, want exactly [%q]", got, id)
				}
				seen[id] = true
			}
			if tt.keep == "" && len(seen) != 2 {
				t.Errorf("two requests got ids %v, want two different ones", seen)
			}
		})
	}
}

// With request ids off, a client's X-Request-Id passes as it came and
// relay adds none, either way.
func TestRequestIDOff(t *testing.T) {
	tb := serving(t, "b", nil)
	c, _ := startPool(t, testPool(), tb.b)
	r := do(c, req{fields: "X-Request-Id: client's own\r\n"})
	if got := tb.last().Header["X-Request-Id"]; len(got) != 1 || got[0] != "client's own" {
		t.Errorf("the backend got X-Request-Id %q, want the client's, untouched", got)
	}
	if got := r.header["X-Request-Id"]; len(got) != 0 {
		t.Errorf("the client got X-Request-Id %q, want none", got)
	}
	r = do(c, req{})
	if got, got2 := tb.last().Header["X-Request-Id"], r.header["X-Request-Id"]; len(got) != 0 || len(got2) != 0 {
		t.Errorf("X-Request-Id %q to the backend, %q to the client; want none", got, got2)
	}
}

// An informational response the backend sends before its answer (103
// Early Hints) names the request by relay's id too, not by one the
// backend made up.
func TestRequestIDOnInterimResponses(t *testing.T) {
	tb := serving(t, "b", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Request-Id", "backend-made")
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
	})
	c, _ := startCore(t, Config{RequestID: true}, testPool(), tb.b)
	r := do(c, req{})
	id := tb.last().Header.Get("X-Request-Id")
	if r.status != 200 || len(r.interim) != 1 || !madeID.MatchString(id) {
		t.Fatalf("%d after %d informational responses, the backend got id %q; want 200 after one 103 and an id", r.status, len(r.interim), id)
	}
	for _, h := range []http.Header{r.interim[0], r.header} {
		if got := h["X-Request-Id"]; len(got) != 1 || got[0] != id {
			t.Errorf("X-Request-Id %q, want exactly [%q], the backend's request's", got, id)
		}
	}
}

// relay's own answers carry the request's id as well, the one the access
// log line holds: those the door words (503), and those the core writes
// itself (a rate limit's 429, a redirect, a gRPC call's error).
func TestRequestIDOnRelaysOwnAnswers(t *testing.T) {
	log := newMemLog()
	pc := testPool()
	pc.RateLimit = limitOf(1, 1, RateByRoute)
	c, p := startCore(t, Config{RequestID: true, AccessLog: log.AccessLog, NewLimiter: frozenLimits()}, pc, refusing(t).b)
	table, err := route.New([]route.Spec{{Name: "old", Path: "/old", Redirect: &route.Redirect{Status: 301, Path: "/new"}}}, route.Reject)
	if err != nil {
		t.Fatal(err)
	}
	c.SetRouting(Routing{Table: table, Default: p})
	grpcCall := req{method: "POST", target: "/svc/M", fields: "Content-Type: application/grpc\r\n", body: "\x00\x00\x00\x00\x00"}
	var ids []string
	for _, tt := range []struct {
		name   string
		r      req
		status int
	}{
		{"no backend is up", req{}, 503},
		{"over the rate limit", req{}, 429},
		{"a redirect", req{target: "/old"}, 301},
		{"a gRPC call over the rate limit", grpcCall, 200},
	} {
		r := do(c, tt.r)
		id := r.header.Get("X-Request-Id")
		if r.status != tt.status || !madeID.MatchString(id) || len(r.header["X-Request-Id"]) != 1 {
			t.Errorf("%s: %d with X-Request-Id %q, want relay's %d with one id", tt.name, r.status, r.header["X-Request-Id"], tt.status)
		}
		ids = append(ids, id)
	}
	var logged []string
	for _, l := range logLines[struct {
		RequestID string `json:"request_id"`
	}](t, log) {
		logged = append(logged, l.RequestID)
	}
	if strings.Join(logged, " ") != strings.Join(ids, " ") {
		t.Errorf("the access log holds ids %q, the clients got %q", logged, ids)
	}
}
