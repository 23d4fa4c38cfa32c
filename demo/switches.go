package demo

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// maxDelay bounds ?delay= so a typo cannot hold a connection for hours.
const maxDelay = 5 * time.Minute

// withSwitches applies the delay and status query switches around next.
// Both are checked before waiting, so a bad value is reported at once.
func withSwitches(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery == "" {
			next.ServeHTTP(w, r)
			return
		}
		q := r.URL.Query()
		var delay time.Duration
		if v := q.Get("delay"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > maxDelay {
				http.Error(w, fmt.Sprintf("bad delay %q: want a Go duration from 0 to %v, such as 200ms", v, maxDelay),
					http.StatusBadRequest)
				return
			}
			delay = d
		}
		code := 0
		if v := q.Get("status"); v != "" {
			c, err := strconv.Atoi(v)
			if err != nil || c < 200 || c > 999 {
				http.Error(w, fmt.Sprintf("bad status %q: want a code from 200 to 999", v), http.StatusBadRequest)
				return
			}
			code = c
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return // the client gave up; nobody is left to answer
			}
		}
		if code != 0 {
			w = &statusWriter{ResponseWriter: w, code: code}
		}
		next.ServeHTTP(w, r)
	})
}

// statusWriter answers with code whatever status the endpoint writes, and
// drops the body when code forbids one (204, 304), so any endpoint can be
// made to fail with its usual body.
type statusWriter struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (s *statusWriter) WriteHeader(int) {
	if s.wroteHeader {
		return
	}
	s.wroteHeader = true
	if !bodyAllowed(s.code) {
		s.Header().Del("Content-Length")
	}
	s.ResponseWriter.WriteHeader(s.code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	s.WriteHeader(s.code)
	if !bodyAllowed(s.code) {
		return len(p), nil
	}
	return s.ResponseWriter.Write(p)
}

// FlushError lets http.ResponseController flush through the wrapper without
// sending the endpoint's own status first.
func (s *statusWriter) FlushError() error {
	s.WriteHeader(s.code)
	return http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap exposes the real writer to http.ResponseController.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func bodyAllowed(code int) bool {
	return code != http.StatusNoContent && code != http.StatusNotModified
}
