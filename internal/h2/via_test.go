package h2

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
)

// TestViaOverHTTP2: a request that came over HTTP/2 reaches the backend
// with relay's Via entry "2 relay-ID" after the client's; one whose Via
// already carries that entry has been through this relay before and is
// answered 508 on its stream, without reaching the backend.
func TestViaOverHTTP2(t *testing.T) {
	var hits atomic.Int32
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, strings.Join(r.Header.Values("Via"), "|"))
	})
	f := startFront(t, b)
	cl := h2Client(t)
	do := func(via string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", f.url+"/", nil)
		if via != "" {
			req.Header.Set("Via", via)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, got := do("1.1 edge")
	m := regexp.MustCompile(`^1\.1 edge, 2 (relay-[0-9a-f]{16})$`).FindStringSubmatch(got)
	if code != 200 || m == nil {
		t.Fatalf("the backend got Via %q (%d); want one field, the client's entry then relay's \"2 relay-ID\"", got, code)
	}
	code, got = do("1.1 edge, 2 " + m[1])
	if code != 508 || !strings.HasPrefix(got, "Loop Detected: ") {
		t.Errorf("a request carrying relay's own entry: %d %q; want 508 Loop Detected", code, got)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the backend got %d requests, want 1", n)
	}
	// The connection goes on.
	if code, _ := do(""); code != 200 {
		t.Errorf("the next request got %d", code)
	}
}
