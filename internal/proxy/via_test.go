package proxy

import (
	"strings"
	"testing"

	"relay/internal/stats"
)

const testInstance = "0123456789abcdef"

// TestViaEntry: every request relay forwards carries relay's Via entry,
// the client's protocol and relay's pseudonym, after the entries of the
// proxies before it, in one field; another relay's entry, or one that
// only begins like relay's, is forwarded, not taken for a loop.
func TestViaEntry(t *testing.T) {
	const me = "relay-" + testInstance
	rb, reqs := recordingBackend(t, okResponse("ok"))
	r := startRelay(t, Config{Instance: testInstance}, rb.b)
	for _, tt := range []struct {
		name, head string
		want       string
	}{
		{"HTTP/1.1", "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n", "1.1 " + me},
		{"HTTP/1.0", "GET / HTTP/1.0\r\nHost: a.test\r\n\r\n", "1.0 " + me},
		{"after the client's entries, fields joined in order",
			"GET / HTTP/1.1\r\nHost: a.test\r\nVia: 1.0 fred, 1.1 p.example.net (Apache/1.1)\r\nX-A: 1\r\nvia: 2 edge\r\n\r\n",
			"1.0 fred, 1.1 p.example.net (Apache/1.1), 2 edge, 1.1 " + me},
		{"another relay, and a pseudonym that only begins like relay's",
			"GET / HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 relay-0123456789abcdeg, 1.1 " + me + "0, 1.1 x" + me + "\r\n\r\n",
			"1.1 relay-0123456789abcdeg, 1.1 " + me + "0, 1.1 x" + me + ", 1.1 " + me},
		{"a Via the client named in Connection ends here",
			"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: Via\r\nVia: 1.1 hop\r\n\r\n", "1.1 " + me},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, status, _ := roundTrip(t, r, reqs, tt.head)
			if !strings.Contains(status, " 200 ") {
				t.Fatalf("status line %q", status)
			}
			if got := req.Header["Via"]; len(got) != 1 || got[0] != tt.want {
				t.Errorf("the backend got Via %q, want exactly [%q]", got, tt.want)
			}
		})
	}
}

// TestViaLoopIsAnswered508: a request whose Via carries relay's own
// pseudonym has been through this relay before; relay answers 508 Loop
// Detected without forwarding it, counts it among its own answers, and
// the connection serves the next request.
func TestViaLoopIsAnswered508(t *testing.T) {
	const me = "relay-" + testInstance
	rb, reqs := recordingBackend(t, okResponse("ok"))
	r := startRelay(t, Config{Instance: testInstance}, rb.b)
	for i, via := range []string{
		"Via: 1.1 " + me + "\r\n",
		"Via: 1.0 fred, 2 " + me + " (relay)\r\n",
		"via: 1.1 fred\r\nVia: 1.1 proxy,1.1\t" + me + ",1.1 other\r\n",
		"Connection: Via\r\nVia: 1.1 " + me + "\r\n",
	} {
		c, br := dialRelay(t, r)
		write(t, c, "GET /loop HTTP/1.1\r\nHost: a.test\r\n"+via+"\r\n")
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != 508 || resp.Status != "508 Loop Detected" || !strings.Contains(body, "passed through this relay already") {
			t.Errorf("case %d: %s %q; want 508 Loop Detected", i, resp.Status, body)
		}
		// The connection goes on.
		write(t, c, "GET /next HTTP/1.1\r\nHost: a.test\r\n\r\n")
		if resp, _ := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Errorf("case %d: the next request on the connection got %d", i, resp.StatusCode)
		}
		if req := <-reqs; req.Target != "/next" {
			t.Errorf("case %d: the backend got %s", i, req.Target)
		}
		c.Close()
	}
	// A body that came with it is not forwarded either.
	c, br := dialRelay(t, r)
	write(t, c, "POST /loop HTTP/1.1\r\nHost: a.test\r\nVia: 1.1 "+me+"\r\nContent-Length: 5\r\n\r\nhello")
	if resp, _ := readResponse(t, br, "POST"); resp.StatusCode != 508 {
		t.Errorf("a POST that came round: %d, want 508", resp.StatusCode)
	}
	if n := rb.hits.Load(); n != 4 {
		t.Errorf("the backend got %d requests, want only the 4 that did not come round", n)
	}
	if got := own5xx(r.p.Stats()); got != 5 {
		t.Errorf("relay counts %d 5xx answers of its own, want the 5 508s", got)
	}
}

// own5xx counts the 5xx answers relay gave itself, no backend answering.
func own5xx(st *stats.Process) uint64 {
	var n uint64
	for _, p := range st.Pools {
		for m := range p.Unanswered.Responses {
			n += p.Unanswered.Responses[m][4]
		}
	}
	return n
}
