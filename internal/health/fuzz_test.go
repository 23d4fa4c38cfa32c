package health

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"relay/internal/h1"
)

// FuzzProbeResponse feeds arbitrary answers to the HTTP probe and checks
// it against relay's data-path parser: the probe passes only when h1
// accepts the final response head and its status is 2xx, it never panics,
// and it returns within its timeout.
//
//	go test -fuzz=FuzzProbeResponse ./internal/health
func FuzzProbeResponse(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
		"HTTP/1.1 204 No Content\n\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nbody until close",
		"HTTP/1.1 503 Service Unavailable\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: " + strings.Repeat("x", maxHead) + "\r\n\r\n",
		"",
	} {
		f.Add([]byte(seed))
	}
	b := newBackend(f, "http://127.0.0.1:1")
	h := newHTTPCheck(b, "/health", true, newReadBufs())
	f.Fuzz(func(t *testing.T, answer []byte) {
		client, server := net.Pipe()
		go func() {
			server.Write(answer)
			server.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		client.SetDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		_, err := h.read(ctx, client, false)
		client.Close() // frees the writer if the probe stopped reading
		if d := time.Since(start); d > 5*time.Second+time.Second {
			t.Fatalf("the probe took %v", d)
		}
		want := acceptedByDataPath(answer)
		if (err == nil) != want {
			t.Fatalf("probe error %v; the data path accepts a 2xx final head: %v\nanswer %q", err, want, answer)
		}
	})
}

// acceptedByDataPath reports whether relay's h1 reader reads a final 2xx
// response head from answer, after at most maxInterim interim ones, and
// whatever body follows is well framed up to maxDrain bytes.
func acceptedByDataPath(answer []byte) bool {
	br := h1.NewReader(bytes.NewReader(answer), 512, maxHead)
	var resp h1.Response
	for n := 0; ; n++ {
		if err := br.ReadResponse(&resp, false); err != nil {
			return false
		}
		if resp.Status >= 200 || resp.Status == 101 {
			break
		}
		if n == maxInterim {
			return false
		}
	}
	if resp.Status < 200 || resp.Status > 299 {
		return false
	}
	var body h1.Body
	body.Reset(br, resp.Body, resp.ContentLength)
	buf := make([]byte, 4096)
	for read := 0; !body.Done() && read < maxDrain; {
		n, err := body.Read(buf[:min(len(buf), maxDrain-read)])
		read += n
		if err != nil {
			return err.Error() == "EOF"
		}
	}
	return true
}
