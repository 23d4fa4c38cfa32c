package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// An HTTP/2 backend's response whose DATA does not add up to its
// content-length, or that carries content where none may be (204, 304),
// must not reach an HTTP/1.1 client as it is: the client frames the
// message by the head relay writes, so bytes past it would be read as the
// next response on the connection, and bytes short of it would swallow
// the next response. relay cuts the connection instead.
func TestH2BackendFramingCannotSplitHTTP1Responses(t *testing.T) {
	const smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"
	cases := []struct {
		name   string
		answer func(hc *hostileConn, id uint32)
	}{
		{"DATA past content-length", func(hc *hostileConn, id uint32) {
			hc.Head(id, false, ":status", "200", "content-length", "5")
			hc.Data(id, true, "hello"+smuggled)
		}},
		{"DATA past content-length in a later frame", func(hc *hostileConn, id uint32) {
			hc.Head(id, false, ":status", "200", "content-length", "5")
			hc.Data(id, false, "hello")
			hc.Data(id, true, smuggled)
		}},
		{"DATA short of content-length", func(hc *hostileConn, id uint32) {
			hc.Head(id, false, ":status", "200", "content-length", "100")
			hc.Data(id, true, "short")
		}},
		{"trailers short of content-length", func(hc *hostileConn, id uint32) {
			hc.Head(id, false, ":status", "200", "content-length", "100")
			hc.Data(id, false, "short")
			hc.Head(id, true, "x-t", "1")
		}},
		{"content on a 304", func(hc *hostileConn, id uint32) {
			hc.Head(id, false, ":status", "304")
			hc.Data(id, true, smuggled)
		}},
		{"content on a 204", func(hc *hostileConn, id uint32) {
			hc.Head(id, false, ":status", "204")
			hc.Data(id, true, smuggled)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			be := startHostileH2(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
				id := req.StreamID
				for _, f := range req.Fields {
					if f.Name == ":path" && f.Value == "/next" {
						hc.Head(id, false, ":status", "200", "content-length", "4")
						hc.Data(id, true, "next")
						return
					}
				}
				tc.answer(hc, id)
			})
			r := startRelay(t, Config{Pool: core.PoolConfig{Protocol: core.H2C}}, be.b)
			c, _ := dialRelay(t, r)
			// Pipelined: a client that reuses the connection reads the
			// second response where the first one's head says it starts.
			write(t, c, "GET /hostile HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
			got, closed := readUntilClosed(c, 2*time.Second)
			if strings.Contains(got, "smuggled") {
				t.Fatalf("the backend's bytes reached the client as a response of their own:\n%q", got)
			}
			if closed {
				return // cut off: the client knows the response is broken
			}
			// Still open: what came must be two whole responses, the
			// second the one to /next.
			br := bufio.NewReader(strings.NewReader(got))
			var last string
			for range 2 {
				resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
				if err != nil {
					t.Fatalf("relay kept the connection open after a response the client cannot frame (%v):\n%q", err, got)
				}
				b, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatalf("relay kept the connection open after a response the client cannot frame (%v):\n%q", err, got)
				}
				last = string(b)
			}
			if last != "next" || br.Buffered() > 0 {
				t.Fatalf("relay kept the connection open after a response the client cannot frame:\n%q", got)
			}
		})
	}
}
