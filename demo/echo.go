package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// echoReply is what /echo answers. The body is counted, not returned, so an
// echo of a large upload stays small.
type echoReply struct {
	Method           string      `json:"method"`
	Path             string      `json:"path"`
	Proto            string      `json:"proto"`
	Host             string      `json:"host"`
	Headers          http.Header `json:"headers"`
	BodyLength       int64       `json:"body_length"`
	RemoteAddr       string      `json:"remote_addr"`
	TransferEncoding []string    `json:"transfer_encoding,omitempty"`
	Trailers         http.Header `json:"trailers,omitempty"`
}

func (s *server) serveEcho(w http.ResponseWriter, r *http.Request) {
	n, err := s.count(r.Body)
	if err != nil {
		http.Error(w, fmt.Sprintf("reading request body after %d bytes: %v", n, err), http.StatusBadRequest)
		return
	}
	writeJSON(w, echoReply{
		Method:           r.Method,
		Path:             r.RequestURI,
		Proto:            r.Proto,
		Host:             r.Host,
		Headers:          r.Header,
		BodyLength:       n,
		RemoteAddr:       r.RemoteAddr,
		TransferEncoding: r.TransferEncoding,
		Trailers:         r.Trailer,
	})
}

func (s *server) serveUpload(w http.ResponseWriter, r *http.Request) {
	n, err := s.count(r.Body)
	if err != nil {
		http.Error(w, fmt.Sprintf("reading upload after %d bytes: %v", n, err), http.StatusBadRequest)
		return
	}
	writeJSON(w, struct {
		Bytes int64 `json:"bytes"`
	}{n})
}

// count reads body to its end and returns its length. It reads in 64 KiB
// pieces from pooled buffers: io.Discard alone would read 8 KiB at a time,
// which makes gigabyte uploads needlessly slow.
func (s *server) count(body io.Reader) (int64, error) {
	if body == http.NoBody {
		return 0, nil
	}
	buf := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(buf)
	var n int64
	for {
		k, err := body.Read(*buf)
		n += int64(k)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "encoding reply: "+err.Error(), http.StatusInternalServerError)
		return
	}
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}
