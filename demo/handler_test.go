package demo

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

const hello = "Hello World from 8001 server\n"

// do sends one request to srv and returns the response with its body read.
func do(t *testing.T, srv *httptest.Server, method, target string, body io.Reader) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+target, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestHello(t *testing.T) {
	srv := httptest.NewServer(Handler("8001", nil))
	defer srv.Close()
	tests := []struct {
		name, method, target, body string
	}{
		{name: "root", method: http.MethodGet, target: "/", body: hello},
		{name: "any other path", method: http.MethodGet, target: "/some/where?x=1", body: hello},
		{name: "post", method: http.MethodPost, target: "/", body: hello},
		{name: "head has no body", method: http.MethodHead, target: "/", body: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, srv, tt.method, tt.target, nil)
			if resp.StatusCode != http.StatusOK || body != tt.body {
				t.Errorf("got %d %q, want 200 %q", resp.StatusCode, body, tt.body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("Content-Type %q, want text/plain", ct)
			}
			if resp.ContentLength != int64(len(hello)) {
				t.Errorf("Content-Length %d, want %d", resp.ContentLength, len(hello))
			}
		})
	}
}

func TestHealthSwitch(t *testing.T) {
	var h Health
	srv := httptest.NewServer(Handler("8001", &h))
	defer srv.Close()
	steps := []struct {
		name, method, target string
		wantCode             int
		wantBody             string
	}{
		{"healthy at start", http.MethodGet, "/health", 200, "ok\n"},
		{"switch off", http.MethodPost, "/admin/health/fail", 200, "health failing\n"},
		{"failing", http.MethodGet, "/health", 503, "failing\n"},
		{"still failing", http.MethodGet, "/health", 503, "failing\n"},
		{"admin needs POST", http.MethodGet, "/admin/health/ok", 405, ""},
		{"a GET changed nothing", http.MethodGet, "/health", 503, "failing\n"},
		{"unknown admin path", http.MethodPost, "/admin/health/maybe", 404, ""},
		{"switch on", http.MethodPost, "/admin/health/ok", 200, "health ok\n"},
		{"recovered", http.MethodGet, "/health", 200, "ok\n"},
	}
	for _, s := range steps {
		resp, body := do(t, srv, s.method, s.target, nil)
		if resp.StatusCode != s.wantCode || (s.wantBody != "" && body != s.wantBody) {
			t.Fatalf("%s: %s %s = %d %q, want %d %q", s.name, s.method, s.target, resp.StatusCode, body, s.wantCode, s.wantBody)
		}
	}

	// The switch is shared with whoever holds it, such as a signal handler.
	if !h.Toggle() || !h.Failing() {
		t.Fatal("Toggle from healthy did not switch to failing")
	}
	if resp, _ := do(t, srv, http.MethodGet, "/health", nil); resp.StatusCode != 503 {
		t.Errorf("after Toggle /health = %d, want 503", resp.StatusCode)
	}
	if h.Toggle() {
		t.Fatal("second Toggle did not switch back")
	}
	if resp, _ := do(t, srv, http.MethodGet, "/health", nil); resp.StatusCode != 200 {
		t.Errorf("after second Toggle /health = %d, want 200", resp.StatusCode)
	}
}

func TestSwitches(t *testing.T) {
	srv := httptest.NewServer(Handler("8001", nil))
	defer srv.Close()
	tests := []struct {
		name     string
		target   string
		wantCode int
		wantBody string // exact when set; for 400s a substring
		minTime  time.Duration
	}{
		{name: "status", target: "/?status=503", wantCode: 503, wantBody: hello},
		{name: "status on another path", target: "/health?status=500", wantCode: 500, wantBody: "ok\n"},
		{name: "status without a reason phrase", target: "/?status=599", wantCode: 599, wantBody: hello},
		{name: "status that forbids a body", target: "/?status=204", wantCode: 204, wantBody: ""},
		{name: "delay", target: "/?delay=150ms", wantCode: 200, wantBody: hello, minTime: 150 * time.Millisecond},
		{name: "delay and status", target: "/x?delay=100ms&status=502", wantCode: 502, wantBody: hello,
			minTime: 100 * time.Millisecond},
		{name: "zero delay", target: "/?delay=0s", wantCode: 200, wantBody: hello},
		{name: "status not a number", target: "/?status=abc", wantCode: 400, wantBody: "bad status"},
		{name: "status 1xx", target: "/?status=101", wantCode: 400, wantBody: "bad status"},
		{name: "status too small", target: "/?status=99", wantCode: 400, wantBody: "bad status"},
		{name: "status too large", target: "/?status=1000", wantCode: 400, wantBody: "bad status"},
		{name: "delay not a duration", target: "/?delay=soon", wantCode: 400, wantBody: "bad delay"},
		{name: "delay without unit", target: "/?delay=200", wantCode: 400, wantBody: "bad delay"},
		{name: "negative delay", target: "/?delay=-1s", wantCode: 400, wantBody: "bad delay"},
		{name: "delay above the cap", target: "/?delay=6m", wantCode: 400, wantBody: "bad delay"},
		{name: "bad status is reported before any delay", target: "/?delay=5m&status=x", wantCode: 400,
			wantBody: "bad status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			resp, body := do(t, srv, http.MethodGet, tt.target, nil)
			took := time.Since(start)
			if resp.StatusCode != tt.wantCode {
				t.Errorf("status %d, want %d (body %q)", resp.StatusCode, tt.wantCode, body)
			}
			if tt.wantCode == 400 {
				if !strings.Contains(body, tt.wantBody) {
					t.Errorf("body %q does not mention %q", body, tt.wantBody)
				}
			} else if body != tt.wantBody {
				t.Errorf("body %q, want %q", body, tt.wantBody)
			}
			if took < tt.minTime {
				t.Errorf("answered after %v, want at least %v", took, tt.minTime)
			}
			if tt.minTime == 0 && took > 4*time.Minute {
				t.Errorf("answered after %v without a delay", took)
			}
		})
	}
}

// TestDelayEndsWhenClientLeaves checks that a delayed handler returns as soon
// as its client goes away instead of holding on for the whole delay.
func TestDelayEndsWhenClientLeaves(t *testing.T) {
	returned := make(chan struct{}, 1)
	h := Handler("8001", nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/?delay=4m", nil)
	if resp, err := srv.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a 4 minute delay answered within 100ms")
	}
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("handler still waiting after its client left")
	}
}
