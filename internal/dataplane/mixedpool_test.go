package dataplane

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"relay/internal/h2test"
	"testing"

	"golang.org/x/net/http2"
)

// A pool whose members speak different protocols: a stream the h2c
// member refuses (REFUSED_STREAM) after the request body was sent goes to
// the HTTP/1.1 member, as it may whatever the method, and that member
// gets the whole body: the bytes the HTTP/2 attempt read from the client
// and kept go first, framed as the head says.
func TestMixedPoolRetryKeepsTheBody(t *testing.T) {
	hostile := h2test.StartHostile(t, ioTimeout, func(*h2test.Conn, *http2.MetaHeadersFrame) {}, func(c *h2test.Conn, f *http2.DataFrame) {
		if f.StreamEnded() {
			c.Write(func(fr *http2.Framer) { fr.WriteRSTStream(f.StreamID, http2.ErrCodeRefusedStream) })
		}
	})
	be := serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		w.Header().Set("X-Who", "h1")
		fmt.Fprintf(w, "%s|%v", b, err)
	}))
	r := startRelay(t, `
response_timeout: 2s
backends:
  - url: `+hostile.URL+`
    protocol: h2c
  - `+be+`
`, Options{})
	tried := false
	for i := 0; i < 4; i++ {
		before := hostile.Heads.Load()
		nc := dialTCP(t, r.addr)
		io.WriteString(nc, "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		nc.Close()
		if hostile.Heads.Load() == before {
			continue // the HTTP/1.1 member was picked first
		}
		tried = true
		if resp.StatusCode != 200 || string(body) != "hello|<nil>" {
			t.Errorf("refused by the h2c member, then: %d %q; want 200 \"hello|<nil>\"", resp.StatusCode, body)
		}
	}
	if !tried {
		t.Fatal("the h2c member was never picked")
	}
}
