package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A client that asks for a large response and stops reading is cut off
// once it has taken no bytes for idle_timeout, and the backend's
// connection, stuck behind it, is closed too: a client that does not read
// cannot hold a backend connection for ever (nginx's send_timeout).
func TestClientThatStopsReadingIsCutOff(t *testing.T) {
	failed := make(chan time.Duration, 1)
	hb := newHTTPBackend(t, "a", 1, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		chunk := []byte(strings.Repeat("x", 64<<10))
		for i := 0; i < 2048; i++ { // 128 MiB, far beyond any socket buffers
			if _, err := w.Write(chunk); err != nil {
				failed <- time.Since(start)
				return
			}
		}
		failed <- -1
	})
	r := startRelay(t, Config{IdleTimeout: 500 * time.Millisecond}, hb.b)
	c, _ := dialRelay(t, r)
	write(t, c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	// Read nothing.
	select {
	case d := <-failed:
		if d < 0 {
			t.Fatal("the backend wrote 128 MiB to a client that read nothing")
		}
		t.Logf("the backend's connection was closed %v into the response", d.Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("10 s after the client stopped reading, the backend is still writing to relay")
	}
	expectNoneInFlight(t, r)
}

// A client that reads slowly but steadily is not cut off, however long
// the whole response takes: idle_timeout bounds each wait, not the
// transfer. (The kernel reports a full socket writable again only once
// much of it has drained, so "steadily" means draining a good part of the
// socket buffers within idle_timeout, as with nginx's send_timeout.)
func TestSlowReaderIsNotCutOff(t *testing.T) {
	const size = 24 << 20
	hb := newHTTPBackend(t, "a", 1, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(bytes.Repeat([]byte("y"), size))
	})
	r := startRelay(t, Config{IdleTimeout: 1500 * time.Millisecond}, hb.b)
	c, br := dialRelay(t, r)
	write(t, c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	// At most 6 MiB a second in 64 KiB steps: the transfer takes about
	// 4 s, more than two idle timeouts.
	start := time.Now()
	buf := make([]byte, 64<<10)
	got := 0
	for got < size {
		n, err := io.ReadFull(resp.Body, buf[:min(len(buf), size-got)])
		got += n
		if err != nil {
			t.Fatalf("cut off after %d of %d bytes, %v in: %v", got, size, time.Since(start).Round(time.Millisecond), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("read %d bytes in %v", got, time.Since(start).Round(time.Millisecond))
}

// A tunnel (WebSocket and the like) whose client stops reading while the
// backend sends is cut off after idle_timeout, in cleartext and over TLS
// alike, and the backend's connection with it.
func TestTunnelWhoseClientStopsReadingIsCutOff(t *testing.T) {
	const idle = 500 * time.Millisecond
	for _, overTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "cleartext", true: "TLS"}[overTLS], func(t *testing.T) {
			cut := make(chan error, 1)
			rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
				if _, err := rb.next(br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
				c.SetWriteDeadline(time.Now().Add(5 * time.Second))
				chunk := bytes.Repeat([]byte("x"), 64<<10)
				for i := 0; i < 4096; i++ {
					if _, err := c.Write(chunk); err != nil {
						cut <- err
						return
					}
				}
				cut <- nil
			})
			var c net.Conn
			if overTLS {
				c = startTLSRelay(t, Config{IdleTimeout: idle}, rb.b).dial(t, "http/1.1")
			} else {
				c, _ = dialRelay(t, startRelay(t, Config{IdleTimeout: idle}, rb.b))
			}
			defer c.Close()
			io.WriteString(c, "GET /chat HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
			// Read nothing.
			err := <-cut
			if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
				t.Fatalf("the backend's writes to a client that reads nothing: %v, want relay to close the tunnel within 5 s", err)
			}
		})
	}
}
