package h2

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"relay/internal/core"
	"relay/internal/logging"
)

// TestRequestIDOverHTTP2: a request that came over HTTP/2 reaches the
// backend with relay's X-Request-Id in place of the client's, the client
// gets the same id back in place of the one the backend echoed, relay's
// own error answer on a stream carries one too, and the access log line
// holds each.
func TestRequestIDOverHTTP2(t *testing.T) {
	madeID := regexp.MustCompile(`^[0-9a-f]{32}$`)
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "backend-made")
		io.WriteString(w, strings.Join(r.Header.Values("X-Request-Id"), "|"))
	})
	var buf bytes.Buffer
	access := logging.NewAccessLog(&buf)
	f := startFrontOpts(t, testBodyTime, testLimits(), frontOptions{core: func(c *core.Config) {
		c.RequestID, c.AccessLog = true, access
	}}, b)
	cl := h2Client(t)
	req, _ := http.NewRequest("GET", f.url+"/", nil)
	req.Header.Set("X-Request-Id", "chosen-by-client")
	req.Header.Set("User-Agent", "h2-agent")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got := resp.Header.Values("X-Request-Id")
	if !madeID.Match(sent) || len(got) != 1 || got[0] != string(sent) {
		t.Fatalf("the backend got X-Request-Id %q, the client %q; want one id relay made, the same", sent, got)
	}

	b.SetDisabled(true)
	resp, err = cl.Get(f.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	errID := resp.Header.Get("X-Request-Id")
	if resp.StatusCode != 503 || !madeID.MatchString(errID) || errID == string(sent) {
		t.Fatalf("relay's own answer: %d with X-Request-Id %q; want 503 with a new id", resp.StatusCode, errID)
	}

	// The client can have the answer before relay logs it: the stream
	// is done once its line is in.
	c := serverConn(t, f)
	waitUntil(t, "the streams done", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.running == 0
	})
	if err := access.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("access lines:\n%s\nwant 2", buf.String())
	}
	for i, want := range []string{string(sent), errID} {
		var l struct {
			RequestID string `json:"request_id"`
			UserAgent string `json:"user_agent"`
			Proto     string `json:"proto"`
		}
		if err := json.Unmarshal([]byte(lines[i]), &l); err != nil {
			t.Fatal(err)
		}
		if l.RequestID != want || l.Proto != "HTTP/2.0" || (i == 0 && l.UserAgent != "h2-agent") {
			t.Errorf("line %d: %s; want request_id %q", i, lines[i], want)
		}
	}
}
