package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"relay/internal/logging"
)

func TestAccessLogHasOneLinePerRequest(t *testing.T) {
	a := newHTTPBackend(t, "a", 1, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("hello"))
	})
	var buf bytes.Buffer
	log := logging.NewAccessLog(&buf, logging.WithFlushInterval(time.Millisecond))
	r := startRelay(t, Config{AccessLog: log, HeaderTimeout: 200 * time.Millisecond}, a.b)
	c := newClient(t, 1, "")

	get(t, c, r.url+"/one?x=1")
	get(t, c, r.url+"/missing")
	post(t, c, r.url+"/upload", "12345678")
	a.b.SetDisabled(true)
	get(t, c, r.url+"/none")
	// A head that stops half-way gets 408, which has a line too.
	slow, br := dialRelay(t, r)
	write(t, slow, "GET /slow HTTP/1.1\r\n")
	if line, _ := br.ReadString('\n'); !strings.Contains(line, " 408 ") {
		t.Errorf("half a head got %q, want 408", line)
	}

	// Lines are logged once the response is out; Shutdown waits for every
	// connection to end, and Close for every line to be written.
	if err := r.p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}

	type line struct {
		Msg      string `json:"msg"`
		Client   string `json:"client"`
		Method   string `json:"method"`
		Path     string `json:"path"`
		Status   int    `json:"status"`
		Backend  string `json:"backend"`
		BytesIn  int64  `json:"bytes_in"`
		BytesOut int64  `json:"bytes_out"`
	}
	want := []line{
		{Method: "GET", Path: "/one?x=1", Status: 200, Backend: a.b.Name, BytesOut: 5},
		{Method: "GET", Path: "/missing", Status: 404, Backend: a.b.Name},
		{Method: "POST", Path: "/upload", Status: 200, Backend: a.b.Name, BytesIn: 8, BytesOut: 5},
		{Method: "GET", Path: "/none", Status: 503, BytesOut: int64(len("Service Unavailable: no backend available\n"))},
		{Status: 408},
	}
	text := strings.TrimSuffix(buf.String(), "\n")
	lines := strings.Split(text, "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d access log lines, want %d:\n%s", len(lines), len(want), text)
	}
	for i, raw := range lines {
		var got line
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatalf("line %d is not JSON: %v\n%s", i, err, raw)
		}
		if got.Msg != "access" || !strings.HasPrefix(got.Client, "127.0.0.1:") {
			t.Errorf("line %d: msg %q client %q", i, got.Msg, got.Client)
		}
		got.Msg, got.Client = "", ""
		if i == 1 {
			got.BytesOut = 0 // the 404 body is net/http's business
		}
		if got != want[i] {
			t.Errorf("line %d = %+v, want %+v", i, got, want[i])
		}
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
