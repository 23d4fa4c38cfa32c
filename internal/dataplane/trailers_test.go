package dataplane

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// trailersYAML is one route that changes header fields both ways; the
// trailer backend answers with trailers named as the fields it removes.
const trailersYAML = `
pools:
  api: {backends: [$trailers]}
routes:
  - name: api
    match: {path_prefix: /}
    pool: api
    request_headers:
      set: {X-Req-Set: relay}
      remove: [X-Req-Drop]
    response_headers:
      set: {X-Resp-Set: relay}
      remove: [X-Resp-Drop]
`

// startTrailerBackend starts a backend that reads the request body,
// answers with the request's trailers as JSON, and sends the response
// trailers X-Resp-Drop, X-Resp-Set and X-Resp-Keep after its body.
func startTrailerBackend(t *testing.T) string {
	t.Helper()
	return serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Trailer", "X-Resp-Drop, X-Resp-Set, X-Resp-Keep")
		w.Header().Set("X-Who", "trailers")
		json.NewEncoder(w).Encode(r.Trailer)
		w.(http.Flusher).Flush() // chunked, so that trailers can follow
		w.Header().Set("X-Resp-Drop", "backend")
		w.Header().Set("X-Resp-Set", "backend")
		w.Header().Set("X-Resp-Keep", "backend")
	}))
}

// A field a route removes (or sets) from a message's head must not reach
// the other side in the message's trailers either: a client could get it
// past the route to a backend that reads trailers as header fields, and a
// backend past a route that removes it from responses. The fields a
// request's Connection names stay out of its trailers too.
func TestRouteHeaderChangesReachTrailers(t *testing.T) {
	yml := strings.ReplaceAll(trailersYAML, "$trailers", startTrailerBackend(t))
	r := startRelay(t, yml, Options{})
	sent := [][2]string{{"X-Req-Drop", "client"}, {"X-Req-Set", "client"}, {"X-Hop", "client"}, {"X-Req-Keep", "client"}}
	for _, c := range []struct {
		proto string
		send  func(t *testing.T, addr string, trailers [][2]string) reply
	}{{"HTTP/1.1", postH1WithTrailers}, {"HTTP/2", postH2WithTrailers}} {
		t.Run(c.proto, func(t *testing.T) {
			got := c.send(t, r.addr, sent)
			if got.status != 200 || got.header.Get("X-Who") != "trailers" {
				t.Fatalf("got %v", &got)
			}
			var tr http.Header
			if err := json.Unmarshal(bytes.TrimSpace(got.body), &tr); err != nil {
				t.Fatalf("backend's answer %q: %v", got.body, err)
			}
			if v := tr.Get("X-Req-Keep"); v != "client" {
				t.Errorf("backend got trailer X-Req-Keep %q, want %q (trailers: %v)", v, "client", tr)
			}
			for _, name := range []string{"X-Req-Drop", "X-Req-Set"} {
				if v, ok := tr[name]; ok {
					t.Errorf("backend got trailer %s %q, which the route removes", name, v)
				}
			}
			if v, ok := tr["X-Hop"]; ok && c.proto == "HTTP/1.1" {
				t.Errorf("backend got trailer X-Hop %q, which the request's Connection names", v)
			}
			if v := got.header.Values("X-Resp-Drop"); len(v) > 0 {
				t.Errorf("client got X-Resp-Drop %q, which the route removes", v)
			}
			if v := got.header.Values("X-Resp-Set"); len(v) != 1 || v[0] != "relay" {
				t.Errorf("client got X-Resp-Set %q, want only the route's %q", v, "relay")
			}
			if v := got.header.Get("X-Resp-Keep"); v != "backend" {
				t.Errorf("client got trailer X-Resp-Keep %q, want %q", v, "backend")
			}
		})
	}
}

// postH1WithTrailers sends a chunked POST whose head's Connection names
// X-Hop, with trailers, and reads the response; its trailers are merged
// into reply.header.
func postH1WithTrailers(t *testing.T, addr string, trailers [][2]string) reply {
	t.Helper()
	nc := dialTCP(t, addr)
	defer nc.Close()
	var b strings.Builder
	b.WriteString("POST /x HTTP/1.1\r\nHost: example.com\r\nConnection: close, X-Hop\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n")
	for _, f := range trailers {
		fmt.Fprintf(&b, "%s: %s\r\n", f[0], f[1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(nc, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range resp.Trailer {
		resp.Header[k] = append(resp.Header[k], v...)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

// postH2WithTrailers sends a POST over h2c: HEADERS, DATA, then the
// trailers as a HEADERS frame that ends the stream; the response's
// trailers are merged into reply.header.
func postH2WithTrailers(t *testing.T, addr string, trailers [][2]string) reply {
	t.Helper()
	nc := dialTCP(t, addr)
	defer nc.Close()
	if _, err := io.WriteString(nc, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(nc, nc)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/x"}, {":authority", "example.com"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	head := append([]byte(nil), hb.Bytes()...)
	hb.Reset()
	for _, f := range trailers {
		enc.WriteField(hpack.HeaderField{Name: strings.ToLower(f[0]), Value: f[1]})
	}
	for _, err := range []error{
		fr.WriteSettings(),
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: head, EndHeaders: true}),
		fr.WriteData(1, false, []byte("hi")),
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	r := readH2Reply(t, fr, "POST with trailers over HTTP/2")
	if r.status == -1 {
		t.Fatalf("POST with trailers over HTTP/2: %s", r.body)
	}
	return r
}

// The forwarded fields feature replaces an untrusted client's
// X-Forwarded-For in the head, and the same field in a chunked body's
// trailers never reaches the backend either.
func TestForwardedForInTrailersNeverReachesBackend(t *testing.T) {
	be := serveBackend(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		fmt.Fprint(w, r.Trailer.Get("X-Forwarded-For"))
	}))
	r := startRelay(t, "backends: ["+be+"]\n", Options{})
	nc := dialTCP(t, r.addr)
	defer nc.Close()
	io.WriteString(nc, "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Forwarded-For\r\nConnection: close\r\n\r\n2\r\nhi\r\n0\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "" {
		t.Errorf("the backend got X-Forwarded-For %q in the trailers of an untrusted client", body)
	}
}
