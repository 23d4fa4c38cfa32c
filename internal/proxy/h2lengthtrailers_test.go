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

// TestH2BackendLengthAndTrailersOnHTTP1 checks that an HTTP/2 backend's
// response of declared length followed by trailers, or ended by an empty
// DATA frame, reaches an HTTP/1.1 client framed by its content-length,
// with no trailer bytes, and that the connection serves the next
// pipelined request.
func TestH2BackendLengthAndTrailersOnHTTP1(t *testing.T) {
	cases := []struct {
		name, method, body string
		answer             func(hc *hostileConn, id uint32)
	}{
		{"trailers after the length", "GET", "hello", func(hc *hostileConn, id uint32) {
			hc.Head(id, false, ":status", "200", "content-length", "5")
			hc.Data(id, false, "hello")
			hc.Head(id, true, "x-t", "1")
		}},
		{"empty DATA after the length", "GET", "hello", func(hc *hostileConn, id uint32) {
			hc.Head(id, false, ":status", "200", "content-length", "5")
			hc.Data(id, false, "hello")
			hc.Data(id, true, "")
		}},
		{"length 0 and trailers", "GET", "", func(hc *hostileConn, id uint32) {
			hc.Head(id, false, ":status", "200", "content-length", "0")
			hc.Head(id, true, "x-t", "1")
		}},
		{"HEAD with trailers", "HEAD", "", func(hc *hostileConn, id uint32) {
			hc.Head(id, false, ":status", "200", "content-length", "5")
			hc.Head(id, true, "x-t", "1")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			be := startHostileH2(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
				id := req.StreamID
				if req.PseudoValue("path") == "/next" {
					hc.Head(id, false, ":status", "200", "content-length", "4")
					hc.Data(id, true, "next")
					return
				}
				tc.answer(hc, id)
			})
			r := startRelay(t, Config{Pool: core.PoolConfig{Protocol: core.H2C}}, be.b)
			c, _ := dialRelay(t, r)
			write(t, c, tc.method+" /first HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			for i, want := range []string{tc.body, "next"} {
				method := tc.method
				if i == 1 {
					method = "GET"
				}
				resp, err := http.ReadResponse(br, &http.Request{Method: method})
				if err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				b, err := io.ReadAll(resp.Body)
				if err != nil || string(b) != want || len(resp.TransferEncoding) > 0 {
					t.Fatalf("response %d: body %q (%v), transfer-encoding %v; want %q", i, b, err, resp.TransferEncoding, want)
				}
				if strings.Contains(string(b), "x-t") || len(resp.Trailer) > 0 {
					t.Fatalf("response %d: trailers leaked: %v", i, resp.Trailer)
				}
			}
		})
	}
}
