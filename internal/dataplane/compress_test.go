package dataplane

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// compressYAML compresses every response of the default pool, and one
// route's with gzip only; $h1 and $h2c are the same backend's handler
// over HTTP/1.1 and over h2c.
const compressYAML = `
backends: [$h1]
compress: {min_length: 512}
pools:
  up2: {backends: [$h2c], protocol: h2c, compress: {min_length: 512}}
routes:
  - name: gz
    match: {path_prefix: /gz/}
    strip_prefix: true
    pool: default
    compress: {encodings: [gzip], min_length: 512}
  - name: h2
    match: {path_prefix: /h2/}
    strip_prefix: true
    pool: up2
  - name: plain
    match: {path_prefix: /plain/}
    strip_prefix: true
    pool: default
    compress: null
`

// htmlDoc is a page of text that compresses as pages do, not as a run of
// one byte does.
var htmlDoc = func() []byte {
	var b bytes.Buffer
	b.WriteString("<!doctype html><html><body>\n")
	for i := 0; b.Len() < 100<<10; i++ {
		fmt.Fprintf(&b, "<p id=\"p%d\">Paragraph %d of the page, with word %d and %x.</p>\n", i, i, i*7919%1000, i*31)
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}()

// compressBackend answers the paths the compression tests ask for.
func compressBackend() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Accept-Ranges", "bytes")
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(304)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(htmlDoc))
	})
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(htmlDoc[:100])
	})
	mux.HandleFunc("/notransform", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Cache-Control", "public, no-transform")
		w.Write(htmlDoc)
	})
	mux.HandleFunc("/coded", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write(htmlDoc)
		zw.Close()
	})
	mux.HandleFunc("/cookie", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Set-Cookie", "session=secret")
		w.Write(htmlDoc)
	})
	mux.HandleFunc("/image", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(htmlDoc)
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(204)
	})
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		streamParts(w, r, 3)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		streamParts(w, r, 3)
	})
	return mux
}

// streamParts writes n parts of 2 KiB a gap apart, each flushed, and
// stamps each with when it was written.
func streamParts(w http.ResponseWriter, r *http.Request, n int) {
	for i := range n {
		if i > 0 {
			time.Sleep(streamGap)
		}
		fmt.Fprintf(w, "data: part %d at %d\n%s\n\n", i, time.Now().UnixNano(), strings.Repeat("x", 2<<10))
		w.(http.Flusher).Flush()
	}
}

// streamGap is the time between the parts of a streamed response: each
// part must reach the client well before the next is written.
const streamGap = 300 * time.Millisecond

// startCompressRelay serves compressYAML over one backend reached by both
// protocols.
func startCompressRelay(t *testing.T) *testRelay {
	t.Helper()
	h := compressBackend()
	h1 := serveBackend(t, h)
	h2 := serveBackend(t, h2c.NewHandler(h, &http2.Server{}))
	yml := strings.NewReplacer("$h1", h1, "$h2c", h2).Replace(compressYAML)
	return startRelay(t, yml, Options{})
}

// clients returns an HTTP/1.1 and an h2c client of the relay that leave
// Accept-Encoding and the body's coding to the test.
func clients(r *testRelay) map[string]*http.Client {
	h2 := h2cTransport()
	h2.DisableCompression = true
	return map[string]*http.Client{
		"http1": {Timeout: ioTimeout, Transport: &http.Transport{DisableCompression: true}},
		"h2c":   {Timeout: ioTimeout, Transport: h2},
	}
}

// cget asks for path with Accept-Encoding ae (none when "") and the other
// fields in hdr, and returns the response with its body read whole.
func cget(t *testing.T, c *http.Client, r *testRelay, method, path, ae string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+r.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ae != "" {
		req.Header.Set("Accept-Encoding", ae)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return resp, body
}

// decode undoes coding on body with the Go decoders.
func decode(t *testing.T, coding string, body []byte) []byte {
	t.Helper()
	var rd io.Reader
	switch coding {
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		rd = zr
	case "br":
		rd = brotli.NewReader(bytes.NewReader(body))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		rd = zr
	default:
		return body
	}
	out, err := io.ReadAll(rd)
	if err != nil {
		t.Fatalf("decoding %s: %v", coding, err)
	}
	return out
}

// Every coding through both doors and both upstream protocols decodes to
// the backend's body, and the head says what was done: Content-Encoding,
// Vary, no Content-Length or Accept-Ranges, the ETag of the coding.
func TestCompressionCodings(t *testing.T) {
	r := startCompressRelay(t)
	for door, c := range clients(r) {
		for _, up := range []string{"", "/h2"} {
			for _, tc := range []struct{ ae, want string }{
				{"gzip", "gzip"}, {"br", "br"}, {"zstd", "zstd"},
				{"gzip, deflate, br, zstd", "zstd"}, // the server's order
				{"br;q=1, gzip;q=0.5", "br"},
				{"gzip;q=0, identity", ""},
				{"", ""},
			} {
				t.Run(door+up+"/"+tc.ae, func(t *testing.T) {
					resp, body := cget(t, c, r, "GET", up+"/html", tc.ae)
					if resp.StatusCode != 200 {
						t.Fatalf("status %d", resp.StatusCode)
					}
					if got := resp.Header.Get("Content-Encoding"); got != tc.want {
						t.Fatalf("Content-Encoding %q, want %q", got, tc.want)
					}
					if got := resp.Header.Get("Vary"); !strings.EqualFold(got, "Accept-Encoding") {
						t.Errorf("Vary %q, want Accept-Encoding", got)
					}
					if !bytes.Equal(decode(t, tc.want, body), htmlDoc) {
						t.Fatalf("the decoded body (%d bytes) is not the backend's (%d)", len(body), len(htmlDoc))
					}
					etag := resp.Header.Get("ETag")
					if tc.want == "" {
						if etag != `"v1"` || resp.ContentLength != int64(len(htmlDoc)) {
							t.Errorf("uncoded: ETag %q, length %d; want the backend's", etag, resp.ContentLength)
						}
						return
					}
					if etag != `"v1-`+tc.want+`"` {
						t.Errorf("ETag %q, want \"v1-%s\"", etag, tc.want)
					}
					if resp.ContentLength != -1 || resp.Header.Get("Accept-Ranges") != "" {
						t.Errorf("length %d, Accept-Ranges %q: the backend's, not the coded body's", resp.ContentLength, resp.Header.Get("Accept-Ranges"))
					}
					if len(body) > len(htmlDoc)/3 {
						t.Errorf("coded body is %d bytes of %d", len(body), len(htmlDoc))
					}
					// Revalidating with the coded tag reaches the backend
					// as its own tag: 304, still varying.
					resp, _ = cget(t, c, r, "GET", up+"/html", tc.ae, "If-None-Match", etag)
					if resp.StatusCode != 304 || !strings.EqualFold(resp.Header.Get("Vary"), "Accept-Encoding") {
						t.Errorf("revalidation: status %d, Vary %q; want 304 with Vary", resp.StatusCode, resp.Header.Get("Vary"))
					}
				})
			}
		}
	}
}

// A route's compress section replaces its pool's, and null turns it off.
func TestCompressionPerRoute(t *testing.T) {
	r := startCompressRelay(t)
	c := clients(r)["http1"]
	if resp, _ := cget(t, c, r, "GET", "/gz/html", "zstd, br, gzip"); resp.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("route gz: Content-Encoding %q, want gzip (its only coding)", resp.Header.Get("Content-Encoding"))
	}
	if resp, _ := cget(t, c, r, "GET", "/plain/html", "gzip"); resp.Header.Get("Content-Encoding") != "gzip" {
		// compress: null in a route is as if it were absent: the pool's.
		t.Errorf("route plain: Content-Encoding %q, want the pool's gzip", resp.Header.Get("Content-Encoding"))
	}
}

// What is never compressed stays as the backend sent it.
func TestCompressionNever(t *testing.T) {
	r := startCompressRelay(t)
	for door, c := range clients(r) {
		for _, tc := range []struct {
			name, method, path string
			hdr                []string
			status             int
			vary               bool
		}{
			{"below min_length", "GET", "/small", nil, 200, false},
			{"no-transform", "GET", "/notransform", nil, 200, false},
			{"coded already", "GET", "/coded", nil, 200, false},
			{"sets a cookie", "GET", "/cookie", nil, 200, true},
			{"type not listed", "GET", "/image", nil, 200, false},
			{"no content", "GET", "/empty", nil, 204, false},
			{"range", "GET", "/html", []string{"Range", "bytes=0-99"}, 206, false}, // 100 bytes: under min_length
			{"head", "HEAD", "/html", nil, 200, false},
			{"event stream", "GET", "/events", nil, 200, false},
		} {
			t.Run(door+"/"+tc.name, func(t *testing.T) {
				resp, _ := cget(t, c, r, tc.method, tc.path, "gzip, br, zstd", tc.hdr...)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
				ce := resp.Header.Get("Content-Encoding")
				if tc.path == "/coded" {
					if ce != "gzip" {
						t.Fatalf("Content-Encoding %q, want the backend's gzip", ce)
					}
				} else if ce != "" {
					t.Fatalf("Content-Encoding %q: compressed", ce)
				}
				if got := resp.Header.Get("Vary") != ""; got != tc.vary {
					t.Errorf("Vary %q; want it: %v", resp.Header.Get("Vary"), tc.vary)
				}
			})
		}
	}
}

// A streamed response through a compressing route leaves as it comes:
// each part reaches the client within 100 ms of being written, compressed
// or, for an event stream, as it is.
func TestCompressionStreams(t *testing.T) {
	r := startCompressRelay(t)
	for door, c := range clients(r) {
		for _, tc := range []struct{ path, coding string }{{"/stream", "gzip"}, {"/events", ""}, {"/h2/stream", "gzip"}} {
			t.Run(door+tc.path, func(t *testing.T) {
				req, _ := http.NewRequest("GET", "http://"+r.addr+tc.path, nil)
				req.Header.Set("Accept-Encoding", "gzip")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if got := resp.Header.Get("Content-Encoding"); got != tc.coding {
					t.Fatalf("Content-Encoding %q, want %q", got, tc.coding)
				}
				var rd io.Reader = resp.Body
				if tc.coding == "gzip" {
					zr, err := gzip.NewReader(resp.Body)
					if err != nil {
						t.Fatal(err)
					}
					rd = zr
				}
				br := bufio.NewReader(rd)
				for i := range 3 {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("part %d: %v", i, err)
					}
					var n int
					var at int64
					if _, err := fmt.Sscanf(line, "data: part %d at %d", &n, &at); err != nil || n != i {
						t.Fatalf("part %d: read %q", i, line)
					}
					if late := time.Since(time.Unix(0, at)); late > 100*time.Millisecond {
						t.Errorf("part %d arrived %v after the backend wrote it", i, late)
					}
					br.ReadString('\n')
					br.ReadString('\n')
				}
			})
		}
	}
}

// curl --compressed decodes what relay sends through both doors.
func TestCompressionCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is needed (.ci/run installs it)")
	}
	r := startCompressRelay(t)
	for _, door := range [][]string{{"--http1.1"}, {"--http2-prior-knowledge"}} {
		for _, ae := range []string{"gzip", "br", "zstd"} {
			args := append([]string{"-sS", "--compressed", "-H", "Accept-Encoding: " + ae, "-D", "-", "-o", "/dev/stdout"}, door...)
			out, err := exec.Command(curl, append(args, "http://"+r.addr+"/html")...).Output()
			if err != nil {
				t.Fatalf("curl %v %s: %v", door, ae, err)
			}
			head, body, _ := bytes.Cut(out, []byte("\r\n\r\n"))
			if !bytes.Contains(bytes.ToLower(head), []byte("content-encoding: "+ae)) {
				t.Errorf("curl %v %s: head has no Content-Encoding %s:\n%s", door, ae, ae, head)
			}
			if !bytes.Equal(body, htmlDoc) {
				t.Errorf("curl %v %s: decoded body of %d bytes is not the backend's %d", door, ae, len(body), len(htmlDoc))
			}
		}
	}
}

// A 304 carries the ETag a 200 to the same request would have (RFC 9110
// 15.4.5): relay's 200 carries "v1-gzip", the backend answers the
// revalidation (If-None-Match taken back to "v1") with a 304 of "v1", and
// the client gets "v1-gzip" again, not the identity representation's tag.
func TestCompression304CarriesTheCodedETag(t *testing.T) {
	r := startCompressRelay(t)
	for door, c := range clients(r) {
		resp, _ := cget(t, c, r, "GET", "/html", "gzip")
		etag := resp.Header.Get("ETag")
		if etag != `"v1-gzip"` {
			t.Fatalf("%s: 200 ETag %q", door, etag)
		}
		resp, _ = cget(t, c, r, "GET", "/html", "gzip", "If-None-Match", etag)
		if resp.StatusCode != 304 {
			t.Fatalf("%s: revalidation status %d", door, resp.StatusCode)
		}
		if got := resp.Header.Get("ETag"); got != etag {
			t.Errorf("%s: 304 ETag %q, want %q as the 200 had", door, got, etag)
		}
	}
}
