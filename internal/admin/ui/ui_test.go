package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandlerServesThePageAndItsAssets(t *testing.T) {
	h := Handler()
	for _, tt := range []struct {
		path, status, contentType, contains string
	}{
		{"/", "200", "text/html; charset=utf-8", `<script src="/ui/app.js"`},
		{"/ui/app.js", "200", "text/javascript; charset=utf-8", "function quantile("},
		{"/ui/style.css", "200", "text/css; charset=utf-8", ".badge"},
		{"/ui/index.html", "404", "", ""},
		{"/ui/ui.go", "404", "", ""},
		{"/ui/../ui.go", "404", "", ""},
		{"/other", "404", "", ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", tt.path, nil))
		if got := http.StatusText(rec.Code); rec.Code != map[string]int{"200": 200, "404": 404}[tt.status] {
			t.Errorf("GET %s: %d %s, want %s", tt.path, rec.Code, got, tt.status)
			continue
		}
		if tt.status != "200" {
			continue
		}
		if ct := rec.Header().Get("Content-Type"); ct != tt.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", tt.path, ct, tt.contentType)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tt.path, csp)
		}
		if !strings.Contains(rec.Body.String(), tt.contains) {
			t.Errorf("GET %s: body does not contain %q", tt.path, tt.contains)
		}
	}
}
