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
