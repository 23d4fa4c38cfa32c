// Package ui is relay's dashboard: one page, its script, its style sheet
// and its icon, embedded in the binary so that the page works offline and
// needs no build step. The page polls the admin API (GET /api/backends)
// once a second and computes rates and latency percentiles in the browser
// from the difference between two polls, as Prometheus's rate() and
// histogram_quantile() do.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"net/http"
	"time"
)

//go:embed index.html app.js style.css favicon.svg
var files embed.FS

// ContentSecurityPolicy is sent with the page and its assets. The page
// loads nothing but its own files and calls nothing but its own origin's
// API, and it has no inline script or style, so 'self' is all it needs;
// frame-ancestors 'none' keeps another site from framing the Drain and
// Enable buttons under a user's clicks.
const ContentSecurityPolicy = "default-src 'self'; frame-ancestors 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	name        string
	contentType string
	data        []byte
	etag        string
}

// assets are the files served, by URL path. Only these are served: the
// embedded file system also holds nothing else, but a list keeps what is
// public explicit.
var assets = func() map[string]*asset {
	m := map[string]*asset{}
	for path, a := range map[string]*asset{
		"/":               {name: "index.html", contentType: "text/html; charset=utf-8"},
		"/ui/app.js":      {name: "app.js", contentType: "text/javascript; charset=utf-8"},
		"/ui/style.css":   {name: "style.css", contentType: "text/css; charset=utf-8"},
		"/ui/favicon.svg": {name: "favicon.svg", contentType: "image/svg+xml"},
	} {
		data, err := files.ReadFile(a.name)
		if err != nil {
			panic("ui: " + err.Error()) // the embed directive and the list disagree
		}
		sum := sha256.Sum256(data)
		a.data, a.etag = data, `"`+hex.EncodeToString(sum[:8])+`"`
		m[path] = a
	}
	return m
}()

// Handler serves the dashboard: GET / is the page and GET /ui/NAME its
// script (app.js), style sheet (style.css) and icon (favicon.svg); any
// other path is 404 and any method but GET and HEAD is 405. Responses
// carry ContentSecurityPolicy and Cache-Control: no-cache with an ETag, so
// a browser revalidates (cheaply, with a 304) and never runs a script
// older than the binary that serves it.
//
// Mount it for both "GET /" (exactly) and "GET /ui/".
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		// ServeContent answers If-None-Match with 304, HEAD without a
		// body, and ranges; the zero time sends no Last-Modified.
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.data))
	})
}
