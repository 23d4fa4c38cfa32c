package core

import (
	"testing"

	"relay/internal/stats"
)

// relay's Via entry and the loop check (via.go), through the fake door.

const testInstance = "0123456789abcdef"

// viaCore is a core of instance testInstance over one backend that
// answers 200.
func viaCore(t *testing.T) (*Core, *testBackend) {
	t.Helper()
	tb := serving(t, "ok", nil)
	c, _ := startCore(t, Config{Instance: testInstance}, testPool(), tb.b)
	return c, tb
}

// Every request relay forwards carries relay's Via entry, the client's
// protocol and relay's pseudonym, after the entries of the proxies before
// it, in one field; another relay's entry, or one that only begins like
// relay's, is forwarded, not taken for a loop.
func TestViaEntry(t *testing.T) {
	const me = "relay-" + testInstance
	c, tb := viaCore(t)
	for _, tt := range []struct {
		name string
		r    req
		want string
	}{
		{"HTTP/1.1", req{}, "1.1 " + me},
		{"HTTP/1.0", req{proto: "HTTP/1.0"}, "1.0 " + me},
		{"HTTP/2", req{proto: "HTTP/2.0"}, "2 " + me},
		{"after the client's entries, fields joined in order",
			req{fields: "Via: 1.0 fred, 1.1 p.example.net (Apache/1.1)\r\nX-A: 1\r\nvia: 2 edge\r\n"},
			"1.0 fred, 1.1 p.example.net (Apache/1.1), 2 edge, 1.1 " + me},
		{"another relay, and a pseudonym that only begins like relay's",
			req{fields: "Via: 1.1 relay-0123456789abcdeg, 1.1 " + me + "0, 1.1 x" + me + "\r\n"},
			"1.1 relay-0123456789abcdeg, 1.1 " + me + "0, 1.1 x" + me + ", 1.1 " + me},
		{"a Via the client named in Connection ends here",
			req{fields: "Connection: Via\r\nVia: 1.1 hop\r\n"}, "1.1 " + me},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if r := do(c, tt.r); r.status != 200 {
				t.Fatalf("%d %q", r.status, r.body)
			}
			if got := tb.last().Header["Via"]; len(got) != 1 || got[0] != tt.want {
				t.Errorf("the backend got Via %q, want exactly [%q]", got, tt.want)
			}
		})
	}
}

// A request whose Via carries relay's own pseudonym has been through this
// relay before: it is answered 508 Loop Detected without being forwarded,
// body and all, and counted among the pool's own answers; a request
// without it is forwarded as ever.
func TestViaLoopIsAnswered508(t *testing.T) {
	const me = "relay-" + testInstance
	const want = "Loop Detected: the request has passed through this relay already (Via)\n"
	c, tb := viaCore(t)
	loops := []req{
		{fields: "Via: 1.1 " + me + "\r\n"},
		{fields: "Via: 1.0 fred, 2 " + me + " (relay)\r\n"},
		{fields: "via: 1.1 fred\r\nVia: 1.1 proxy,1.1\t" + me + ",1.1 other\r\n"},
		{fields: "Connection: Via\r\nVia: 1.1 " + me + "\r\n"},
		{method: "POST", fields: "Via: 1.1 " + me + "\r\n", body: "hello"},
		{proto: "HTTP/2.0", fields: "via: 2 " + me + "\r\n"},
	}
	for i, l := range loops {
		if r := do(c, l); r.status != 508 || r.body != want || r.outcome.Backend != nil {
			t.Errorf("case %d: %d %q, want 508 %q from relay", i, r.status, r.body, want)
		}
	}
	if n := tb.hits.Load(); n != 0 {
		t.Errorf("the backend got %d requests that came round", n)
	}
	if r := do(c, req{fields: "Via: 1.1 fred\r\n"}); r.status != 200 || tb.hits.Load() != 1 {
		t.Errorf("a request that did not come round: %d, the backend took %d", r.status, tb.hits.Load())
	}
	var st stats.Process
	c.Stats(&st)
	var own uint64
	for _, p := range st.Pools {
		for m := range p.Unanswered.Responses {
			own += p.Unanswered.Responses[m][4]
		}
	}
	if own != uint64(len(loops)) {
		t.Errorf("the pool counts %d 5xx answers of its own, want the %d 508s", own, len(loops))
	}
}
