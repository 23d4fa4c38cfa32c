package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"relay/internal/logging"
)

// madeID is an id relay makes: a per-process prefix and a counter.
var madeID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestRequestIDs: with request ids on, every request reaches the backend
// with exactly one X-Request-Id and the client gets the same one back; a
// trusted proxy's well-formed id is kept, anyone else's is replaced.
func TestRequestIDs(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		fields  string // extra request fields
		keep    string // the id the backend should get; "" means one relay made
	}{
		{name: "none sent: relay makes one"},
		{name: "a client's is replaced", fields: "X-Request-Id: chosen-by-client\r\n"},
		{name: "a trusted proxy's is kept", trusted: trusted, fields: "X-Request-Id: edge-42.abc_DEF:7\r\n", keep: "edge-42.abc_DEF:7"},
		{name: "a trusted proxy's first is kept", trusted: trusted, fields: "X-Request-Id: first\r\nX-Request-Id: second\r\n", keep: "first"},
		{name: "a trusted proxy's with a space is replaced", trusted: trusted, fields: "X-Request-Id: a b\r\n"},
		{name: "a trusted proxy's longer than 200 bytes is replaced", trusted: trusted, fields: "X-Request-Id: " + strings.Repeat("x", 201) + "\r\n"},
		{name: "a trusted proxy's of 200 bytes is kept", trusted: trusted, fields: "X-Request-Id: " + strings.Repeat("y", 200) + "\r\n", keep: strings.Repeat("y", 200)},
		{name: "a trusted proxy's past ASCII is replaced", trusted: trusted, fields: "X-Request-Id: caf\xc3\xa9\r\n"},
		{name: "a trusted proxy's empty one is replaced", trusted: trusted, fields: "X-Request-Id: \r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The backend echoes an id of its own: the client must get
			// relay's, once.
			rb, reqs := recordingBackend(t, "HTTP/1.1 200 OK\r\nX-Request-Id: backend-made\r\nContent-Length: 2\r\n\r\nok")
			r := startRelay(t, Config{TrustedProxies: tt.trusted, RequestID: true}, rb.b)
			seen := map[string]bool{}
			for range 2 {
				req, status, h := roundTrip(t, r, reqs, "GET / HTTP/1.1\r\nHost: example.test\r\n"+tt.fields+"\r\n")
				if !strings.Contains(status, " 200 ") {
					t.Fatalf("status line %q", status)
				}
				sent := req.Header["X-Request-Id"]
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
				if got := h["X-Request-Id"]; len(got) != 1 || got[0] != id {
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

// TestRequestIDOnRelaysOwnAnswers: relay's own error response carries the
// request's id too, the one the access log line holds.
func TestRequestIDOnRelaysOwnAnswers(t *testing.T) {
	var buf bytes.Buffer
	log := logging.NewAccessLog(&buf)
	r := startRelay(t, Config{RequestID: true, AccessLog: log}, newBackendFor(t, deadAddr(t), 1))
	c, br := dialRelay(t, r)
	write(t, c, "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
	status, h, err := readHead(br)
	if err != nil {
		t.Fatal(err)
	}
	id := h.Get("X-Request-Id")
	if !strings.Contains(status, " 503 ") || !madeID.MatchString(id) {
		t.Fatalf("%q with X-Request-Id %q, want relay's 503 (no backend is up) with an id", status, id)
	}
	c.Close()
	if err := r.p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	if line["request_id"] != id {
		t.Errorf("access line %s, want request_id %q", buf.Bytes(), id)
	}
	if _, ok := line["upstream_response_ms"]; ok {
		t.Errorf("access line %s has upstream_response_ms, though no response head came", buf.Bytes())
	}
	if _, ok := line["upstream_connect_ms"]; !ok {
		t.Errorf("access line %s has no upstream_connect_ms, though a dial was tried", buf.Bytes())
	}
}

// TestRequestIDOff: with request ids off, a client's X-Request-Id passes
// as it came and relay adds none, either way.
func TestRequestIDOff(t *testing.T) {
	rb, reqs := recordingBackend(t, okResponse("ok"))
	r := startRelay(t, Config{RequestID: false}, rb.b)
	req, _, h := roundTrip(t, r, reqs, "GET / HTTP/1.1\r\nHost: example.test\r\nX-Request-Id: client's own\r\n\r\n")
	if got := req.Header["X-Request-Id"]; len(got) != 1 || got[0] != "client's own" {
		t.Errorf("the backend got X-Request-Id %q, want the client's, untouched", got)
	}
	if got := h["X-Request-Id"]; len(got) != 0 {
		t.Errorf("the client got X-Request-Id %q, want none", got)
	}
	req, _, h = roundTrip(t, r, reqs, "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
	if got, got2 := req.Header["X-Request-Id"], h["X-Request-Id"]; len(got) != 0 || len(got2) != 0 {
		t.Errorf("X-Request-Id %q to the backend, %q to the client; want none", got, got2)
	}
}

// TestAccessLogNewFields: the line holds the client's User-Agent and
// Referer (bounded), the request id the client got, the time to get an
// upstream connection (a dial first, 0 for the pooled one after) and the
// backend's time to answer.
func TestAccessLogNewFields(t *testing.T) {
	rb, reqs := recordingBackend(t, okResponse("ok"))
	var buf bytes.Buffer
	log := logging.NewAccessLog(&buf)
	r := startRelay(t, Config{RequestID: true, AccessLog: log}, rb.b)
	c, br := dialRelay(t, r)
	long := strings.Repeat("u", 3000)
	heads := []string{
		"GET /first HTTP/1.1\r\nHost: example.test\r\nUser-Agent: test-agent/1.0\r\nReferer: https://example.test/from\r\n\r\n",
		"GET /second HTTP/1.1\r\nHost: example.test\r\nUser-Agent: " + long + "\r\n\r\n",
	}
	var ids []string
	for _, head := range heads {
		write(t, c, head)
		resp, _ := readResponse(t, br, "GET")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		ids = append(ids, resp.Header.Get("X-Request-Id"))
		<-reqs
	}
	c.Close()
	if err := r.p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	type line struct {
		Path       string   `json:"path"`
		UserAgent  string   `json:"user_agent"`
		Referer    string   `json:"referer"`
		RequestID  string   `json:"request_id"`
		ConnectMS  *float64 `json:"upstream_connect_ms"`
		ResponseMS *float64 `json:"upstream_response_ms"`
		DurationMS float64  `json:"duration_ms"`
	}
	var got []line
	for _, raw := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		got = append(got, l)
	}
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(got), buf.String())
	}
	first, second := got[0], got[1]
	if first.UserAgent != "test-agent/1.0" || first.Referer != "https://example.test/from" || first.RequestID != ids[0] || !madeID.MatchString(ids[0]) {
		t.Errorf("first line %+v, want its user agent, referer and request id %q", first, ids[0])
	}
	if want := long[:logging.MaxValueBytes] + logging.TruncatedMark; second.UserAgent != want || second.Referer != "" || second.RequestID != ids[1] {
		t.Errorf("second line: user agent of %d bytes, referer %q, id %q; want the agent cut at %d and marked, no referer, id %q",
			len(second.UserAgent), second.Referer, second.RequestID, logging.MaxValueBytes, ids[1])
	}
	if first.ConnectMS == nil || first.ResponseMS == nil || *first.ResponseMS > first.DurationMS || *first.ConnectMS > first.DurationMS {
		t.Errorf("first line: connect %v ms, response %v ms, whole %v ms; want both, within the whole", first.ConnectMS, first.ResponseMS, first.DurationMS)
	}
	if second.ConnectMS == nil || *second.ConnectMS != 0 || second.ResponseMS == nil {
		t.Errorf("second line: connect %v ms, response %v ms; want 0 for the pooled connection, and a response time", second.ConnectMS, second.ResponseMS)
	}
}

// TestRequestIDOnInterimResponses: an informational response the backend
// sends before its answer (103 Early Hints) names the request by relay's
// id too, not by one the backend made up.
func TestRequestIDOnInterimResponses(t *testing.T) {
	rb, reqs := recordingBackend(t, "HTTP/1.1 103 Early Hints\r\nX-Request-Id: backend-made\r\nLink: </a.css>; rel=preload\r\n\r\n"+
		"HTTP/1.1 200 OK\r\nX-Request-Id: backend-made\r\nContent-Length: 2\r\n\r\nok")
	r := startRelay(t, Config{RequestID: true}, rb.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
	hint, _ := readResponse(t, br, "GET")
	final, _ := readResponse(t, br, "GET")
	sent := <-reqs
	id := sent.Header.Get("X-Request-Id")
	if hint.StatusCode != 103 || final.StatusCode != 200 {
		t.Fatalf("responses %d then %d, want 103 then 200", hint.StatusCode, final.StatusCode)
	}
	for _, resp := range []*http.Response{hint, final} {
		if got := resp.Header["X-Request-Id"]; len(got) != 1 || got[0] != id {
			t.Errorf("the %d carries X-Request-Id %q, want exactly [%q], the backend's request's", resp.StatusCode, got, id)
		}
	}
}
