package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"relay/internal/logging"
)

// madeID is an id relay makes: a per-process prefix and a counter.
var madeID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// TestRequestIDOnRelaysOwnAnswers: the HTTP/1.1 door's own error response
// carries the request's id too, the one the access log line holds (what
// ids the core gives is tested in internal/core).
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
