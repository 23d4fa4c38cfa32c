package proxy

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// The same shapes framed right reach an HTTP/1.1 client whole, and the
// connection goes on: a 304 or 204 whose stream an empty DATA frame ends,
// a HEAD answered with the content-length of what a GET would get, even
// one whose stream the backend leaves open.
func TestH2BackendEmptyResponsesKeepHTTP1Connections(t *testing.T) {
	be := startHostileH2(t, func(hc *hostileConn, req *http2.MetaHeadersFrame) {
		id := req.StreamID
		path := ""
		for _, f := range req.Fields {
			if f.Name == ":path" {
				path = f.Value
			}
		}
		switch path {
		case "/304":
			hc.Head(id, false, ":status", "304", "etag", `"x"`)
			hc.Data(id, true, "")
		case "/204":
			hc.Head(id, false, ":status", "204")
			hc.Data(id, true, "")
		case "/head":
			hc.Head(id, true, ":status", "200", "content-length", "1000")
		case "/head-open":
			// The stream stays open: relay must not wait for its end
			// before the next response.
			hc.Head(id, false, ":status", "200", "content-length", "1000")
		default:
			hc.Head(id, false, ":status", "200", "content-length", "4")
			hc.Data(id, false, "ne")
			hc.Data(id, true, "xt")
		}
	})
	r := startRelay(t, Config{Pool: core.PoolConfig{Protocol: core.H2C}}, be.b)
	c, br := dialRelay(t, r)
	for _, q := range []struct{ method, path string }{{"GET", "/304"}, {"GET", "/next"}, {"GET", "/204"}, {"GET", "/next"}, {"HEAD", "/head"}, {"GET", "/next"}, {"HEAD", "/head-open"}, {"GET", "/next"}} {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		write(t, c, q.method+" "+q.path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := readResponse(t, br, q.method)
		if q.path == "/next" && (resp.StatusCode != 200 || body != "next") {
			t.Fatalf("after the previous response the client read %d %q", resp.StatusCode, body)
		}
		if strings.HasPrefix(q.path, "/head") && resp.ContentLength != 1000 {
			t.Errorf("HEAD: content-length %d, want the backend's 1000", resp.ContentLength)
		}
		if q.path == "/304" && resp.Header.Get("Content-Length") != "" {
			t.Errorf("304: relay made up a Content-Length: %q", resp.Header.Get("Content-Length"))
		}
	}
}
