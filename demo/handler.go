package demo

import (
	"net/http"
	"strconv"
	"sync"
)

// Handler returns the demo backend for a server listening on port, which
// only appears in the hello line. health switches /health; nil gives the
// handler a switch of its own, reachable through /admin/health/.
func Handler(port string, health *Health) http.Handler {
	if health == nil {
		health = new(Health)
	}
	s := &server{
		hello:   []byte("Hello World from " + port + " server\n"),
		health:  health,
		pattern: newPattern(),
	}
	s.bufs.New = func() any {
		b := make([]byte, 64<<10)
		return &b
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.serveHello)
	mux.HandleFunc("/health", s.serveHealth)
	mux.HandleFunc("/echo", s.serveEcho)
	mux.HandleFunc("/echo/", s.serveEcho)
	mux.HandleFunc("/download", s.serveDownload)
	mux.HandleFunc("/upload", s.serveUpload)
	mux.HandleFunc("/admin/", s.serveAdmin)
	return withSwitches(mux)
}

type server struct {
	hello   []byte
	health  *Health
	pattern []byte    // the repeating download body, never written after newPattern
	bufs    sync.Pool // *[]byte of 64 KiB for counting request bodies
}

func (s *server) serveHello(w http.ResponseWriter, r *http.Request) {
	writeText(w, http.StatusOK, s.hello)
}

func (s *server) serveHealth(w http.ResponseWriter, r *http.Request) {
	if s.health.Failing() {
		writeText(w, http.StatusServiceUnavailable, []byte("failing\n"))
		return
	}
	writeText(w, http.StatusOK, []byte("ok\n"))
}

func (s *server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	var failing bool
	switch r.URL.Path {
	case "/admin/health/fail":
		failing = true
	case "/admin/health/ok":
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed: use POST", http.StatusMethodNotAllowed)
		return
	}
	s.health.SetFailing(failing)
	if failing {
		writeText(w, http.StatusOK, []byte("health failing\n"))
		return
	}
	writeText(w, http.StatusOK, []byte("health ok\n"))
}

func writeText(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}
