// Package ui is relay's dashboard: one page, its script and its style,
// embedded in the binary so it works offline and needs no build step. The
// page polls the admin API (GET /api/backends) once a second and computes
// rates and percentiles from the difference of two polls, as Prometheus's
// rate() and histogram_quantile() do.
package ui

import (
	"embed"
	"net/http"
	"path"
)

//go:embed index.html app.js style.css
var files embed.FS

// contentTypes are the assets' types; anything else is not served.
var contentTypes = map[string]string{
	"index.html": "text/html; charset=utf-8",
	"app.js":     "text/javascript; charset=utf-8",
	"style.css":  "text/css; charset=utf-8",
}

// Handler serves the dashboard: GET / is the page and GET /ui/NAME its
// assets. It sends a Content-Security-Policy that allows only the page's
// own origin, which the page needs nothing beyond.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := "index.html"
		if r.URL.Path != "/" {
			dir, file := path.Split(r.URL.Path)
			if dir != "/ui/" || file == "index.html" {
				http.NotFound(w, r)
				return
			}
			name = file
		}
		ct, ok := contentTypes[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		data, err := files.ReadFile(name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", ct)
		h.Set("Cache-Control", "no-cache")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		h.Set("X-Content-Type-Options", "nosniff")
		w.Write(data)
	})
}
