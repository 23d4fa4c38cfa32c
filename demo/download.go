package demo

import (
	"fmt"
	"net/http"
	"strconv"
)

// patternLen is a multiple of 26, so writing the pattern again and again
// keeps byte i of the body equal to 'a'+i%26 across writes; at about 64 KiB
// a gigabyte takes 16,000 writes (and chunks, when chunked).
const patternLen = 26 * 2520

func newPattern() []byte {
	p := make([]byte, patternLen)
	for i := range p {
		p[i] = 'a' + byte(i%26)
	}
	return p
}

// serveDownload streams size bytes from the fixed pattern, so any size costs
// the same memory.
func (s *server) serveDownload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed: use GET", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	size, err := strconv.ParseInt(q.Get("size"), 10, 64)
	if err != nil || size < 0 {
		http.Error(w, fmt.Sprintf("bad size %q: want a byte count, such as size=1048576", q.Get("size")),
			http.StatusBadRequest)
		return
	}
	chunked := false
	if v := q.Get("chunked"); v != "" {
		if chunked, err = strconv.ParseBool(v); err != nil {
			http.Error(w, fmt.Sprintf("bad chunked %q: want 1 or 0", v), http.StatusBadRequest)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	rc := http.NewResponseController(w)
	if chunked {
		// Flushing the head before any body stops net/http from computing a
		// Content-Length for small sizes; without one, HTTP/1.1 goes chunked.
		w.WriteHeader(http.StatusOK)
		if err := rc.Flush(); err != nil {
			return
		}
	} else {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
	}
	if r.Method == http.MethodHead {
		return
	}
	for size > 0 {
		n := int(min(size, int64(len(s.pattern))))
		if _, err := w.Write(s.pattern[:n]); err != nil {
			return // the client went away
		}
		size -= int64(n)
		if chunked {
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
}
