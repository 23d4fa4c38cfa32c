package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// response_timeout bounds the wait for the answer once the request is
// sent: an upload that takes longer than it, to a backend that reads it
// all and answers at once, gets the backend's answer, not a 504.
func TestUploadLongerThanResponseTimeout(t *testing.T) {
	const (
		respTimeout = 300 * time.Millisecond
		chunk       = 16 << 10
		chunks      = 10 // one every 100 ms: a second of upload
		size        = chunk * chunks
	)
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		if _, _, err := readHead(br); err != nil {
			return
		}
		if _, err := io.CopyN(io.Discard, br, size); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	cfg := withDefaults(Config{})
	cfg.Pool.ResponseTimeout = respTimeout
	cfg.Pool.Retries = 0
	cfg.BodyBufferBytes = 1024 // stream the body rather than hold it first
	r := startRelayExactly(t, cfg, rb.b)

	c, err := net.Dial("tcp", strings.TrimPrefix(r.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(ioTimeout))
	fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: relay.test\r\nContent-Length: %d\r\n\r\n", size)
	go func() {
		b := make([]byte, chunk)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for range chunks {
			<-tick.C
			if _, err := c.Write(b); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	res.Body.Close()
	t.Logf("%d after %v", res.StatusCode, time.Since(start).Round(time.Millisecond))
	if res.StatusCode != http.StatusOK {
		t.Errorf("a 1 s upload with response_timeout %v got %d, want the backend's 200", respTimeout, res.StatusCode)
	}
}
