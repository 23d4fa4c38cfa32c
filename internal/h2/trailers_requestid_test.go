package h2

import (
	"bufio"
	"io"
	"net/http"
	"slices"
	"testing"
)

// An X-Request-Id in a trailer section stays behind, both ways: the id of
// a request travels in the head, and one in the trailers would hand the
// backend a second id the client chose, or the client a second id the
// backend chose, to whoever reads trailers as header fields.
func TestTrailersCarryNoRequestID(t *testing.T) {
	t.Run("response", func(t *testing.T) {
		b := rawBackend(t, func(w *bufio.Writer, req *http.Request) {
			w.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n" +
				"0\r\nX-Request-Id: backend-chosen\r\nGrpc-Status: 0\r\n\r\n")
		})
		f := startFront(t, b)
		rc := dialRaw(t, f.addr)
		rc.get(1, "/")
		r := rc.response(1)
		if r.status != 200 || string(r.body) != "hello" || !r.ended {
			t.Fatalf("status %d, body %q, ended %v", r.status, r.body, r.ended)
		}
		var got []string
		for _, hf := range r.trailers {
			got = append(got, hf.Name+"="+hf.Value)
		}
		if want := []string{"grpc-status=0"}; !slices.Equal(got, want) {
			t.Errorf("trailers %q, want %q", got, want)
		}
	})
	t.Run("request", func(t *testing.T) {
		got := make(chan http.Header, 1)
		b := newBackend(t, "b", func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			got <- r.Trailer
		})
		f := startFront(t, b)
		rc := dialRaw(t, f.addr)
		rc.writeHeaders(1, false, request("POST", "/")...)
		if err := rc.fr.WriteData(1, false, []byte("body")); err != nil {
			t.Fatal(err)
		}
		rc.writeHeaders(1, true, "x-request-id", "client-chosen", "x-sum", "7")
		if r := rc.response(1); r.status != 200 {
			t.Fatalf("status %d, reset %v (%v)", r.status, r.reset, r.code)
		}
		tr := await(t, got, "the backend's request")
		if v := tr.Values("X-Request-Id"); len(v) != 0 {
			t.Errorf("the backend got X-Request-Id %q in the trailers, want none", v)
		}
		if v := tr.Get("X-Sum"); v != "7" {
			t.Errorf("the backend got X-Sum %q in the trailers, want 7", v)
		}
	})
}
