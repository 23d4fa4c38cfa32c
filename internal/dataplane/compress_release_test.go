package dataplane

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"relay/internal/compress"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	"golang.org/x/net/http2/hpack"
)

// cutBackend is compressBackend with three more paths: /slow sends a
// part of a page and then nothing until relay leaves; /cut sends a part
// and then breaks off, a reset of the connection over HTTP/1.1 and of
// the stream over HTTP/2; /pause sends a part, waits to hear from resume
// and sends the rest of the page. A part is 32 KiB, in one chunk over
// HTTP/1.1, and sent is told each time one is written.
func cutBackend(sent chan<- struct{}, resume <-chan struct{}) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", compressBackend())
	part := htmlDoc[:32<<10]
	mux.HandleFunc("/pause", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write(part)
		w.(http.Flusher).Flush()
		sent <- struct{}{}
		select {
		case <-resume:
			w.Write(htmlDoc[len(part):])
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write(part)
		w.(http.Flusher).Flush()
		sent <- struct{}{}
		<-r.Context().Done() // relay closed the connection or the stream
	})
	mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			w.Header().Set("Content-Type", "text/html")
			w.Write(part)
			w.(http.Flusher).Flush()
			sent <- struct{}{}
			panic(http.ErrAbortHandler) // RST_STREAM
		}
		nc, bw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(part), part)
		bw.Flush()
		sent <- struct{}{}
		nc.(*net.TCPConn).SetLinger(0)
		nc.Close()
	})
	return mux
}

// startCutRelay serves compressYAML over cutBackend, by both protocols,
// and a pool "retry" whose first backend refuses connections.
func startCutRelay(t *testing.T) (r *testRelay, sent, resume chan struct{}) {
	t.Helper()
	sent, resume = make(chan struct{}, 16), make(chan struct{}, 16)
	h := cutBackend(sent, resume)
	h1 := serveBackend(t, h)
	h2 := serveBackend(t, h2c.NewHandler(h, &http2.Server{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	yml := strings.NewReplacer("$h1", h1, "$h2c", h2).Replace(compressYAML) + `
  - name: retry
    match: {path_prefix: /retry/}
    strip_prefix: true
    pool: retry
` + "retries: 2\n"
	yml = strings.Replace(yml, "pools:\n", "pools:\n  retry: {backends: ["+refused+", "+h1+"], compress: {min_length: 512}}\n", 1)
	return startRelay(t, yml, Options{}), sent, resume
}

// inUse fails the test unless exactly n encoders are in use.
func inUse(t *testing.T, what string, n int64) {
	t.Helper()
	if got := compress.Encoders().InUse; got != n {
		t.Fatalf("%s: %d encoders in use, want %d", what, got, n)
	}
}

// Every way a compressed response can end gives its encoder back: the
// client leaving mid-body over either door, the backend breaking off
// mid-body over either upstream protocol, an answer after a retry, and
// the responses that take none (HEAD, 304).
func TestCompressionReleasesEncoders(t *testing.T) {
	r, sent, _ := startCutRelay(t)
	waitEncodersIdle(t)

	t.Run("http1 client leaves mid-body", func(t *testing.T) {
		nc := dialTCP(t, r.addr)
		defer nc.Close()
		fmt.Fprint(nc, "GET /slow HTTP/1.1\r\nHost: app.example\r\nAccept-Encoding: gzip\r\n\r\n")
		br := bufio.NewReader(nc)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("not compressed: %v", resp.Header)
		}
		<-sent
		if _, err := resp.Body.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		inUse(t, "the body begun", 1)
		nc.Close()
		waitEncodersIdle(t)
	})

	t.Run("http2 client resets the stream mid-body", func(t *testing.T) {
		nc := dialTCP(t, r.addr)
		defer nc.Close()
		io.WriteString(nc, http2.ClientPreface)
		fr := http2.NewFramer(nc, nc)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		fr.WriteSettings()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/slow"}, {":authority", "app.example"}, {"accept-encoding", "gzip"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		for data := false; !data; {
			f, err := fr.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					fr.WriteSettingsAck()
				}
			case *http2.MetaHeadersFrame:
				if ce := f.PseudoValue("status") + " " + headerOf(f, "content-encoding"); ce != "200 gzip" {
					t.Fatalf("head: %s", ce)
				}
			case *http2.DataFrame:
				data = len(f.Data()) > 0
			case *http2.RSTStreamFrame, *http2.GoAwayFrame:
				t.Fatalf("%v before the body", f)
			}
		}
		inUse(t, "the body begun", 1)
		fr.WriteRSTStream(1, http2.ErrCodeCancel)
		waitEncodersIdle(t)
		<-sent
	})

	for _, up := range []string{"", "/h2"} {
		t.Run("backend breaks off mid-body"+up, func(t *testing.T) {
			nc := dialTCP(t, r.addr)
			defer nc.Close()
			fmt.Fprintf(nc, "GET %s/cut HTTP/1.1\r\nHost: app.example\r\nAccept-Encoding: zstd\r\n\r\n", up)
			resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Header.Get("Content-Encoding") != "zstd" {
				t.Fatalf("not compressed: %v", resp.Header)
			}
			if _, err := io.ReadAll(resp.Body); err == nil {
				t.Fatal("the body read whole; want it cut off as the backend's was")
			}
			<-sent
			waitEncodersIdle(t)
		})
	}

	c := clients(r)
	for door, cl := range c {
		t.Run(door+" retry", func(t *testing.T) {
			resp, body := cget(t, cl, r, "GET", "/retry/html", "gzip")
			if resp.Header.Get("Content-Encoding") != "gzip" || !bytes.Equal(decode(t, "gzip", body), htmlDoc) {
				t.Fatalf("after a retry: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
			}
			waitEncodersIdle(t)
		})
		t.Run(door+" HEAD and 304", func(t *testing.T) {
			before := compress.Encoders()
			if resp, _ := cget(t, cl, r, "HEAD", "/html", "gzip"); resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" {
				t.Fatalf("HEAD: %d, Content-Encoding %q", resp.StatusCode, resp.Header.Get("Content-Encoding"))
			}
			if resp, _ := cget(t, cl, r, "GET", "/html", "gzip", "If-None-Match", `"v1-gzip"`); resp.StatusCode != 304 {
				t.Fatalf("revalidation: %d", resp.StatusCode)
			}
			inUse(t, "after HEAD and 304", 0)
			if after := compress.Encoders(); after.OverBudget != before.OverBudget {
				t.Errorf("HEAD and 304 counted over budget: %+v, then %+v", before, after)
			}
		})
	}
	waitEncodersIdle(t)
}

// headerOf is the value of the field name in f, "" when absent.
func headerOf(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// A backend that pauses after a chunk larger than relay's read buffer
// has sent the chunk's CRLF, which relay reads only with the next chunk:
// those two bytes must not count as more of the body, or the encoder
// holds the chunk's end back until the backend sends again. Every coding,
// through both doors and from both upstream protocols, gets the client
// the whole first part before the backend goes on.
func TestCompressionFlushesBeforeABackendPause(t *testing.T) {
	r, sent, resume := startCutRelay(t)
	part := 32 << 10
	for door, c := range clients(r) {
		for _, up := range []string{"", "/h2"} {
			for _, coding := range []string{"gzip", "br", "zstd"} {
				t.Run(door+up+"/"+coding, func(t *testing.T) {
					req, _ := http.NewRequest("GET", "http://"+r.addr+up+"/pause", nil)
					req.Header.Set("Accept-Encoding", coding)
					resp, err := c.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					if got := resp.Header.Get("Content-Encoding"); got != coding {
						t.Fatalf("Content-Encoding %q, want %q", got, coding)
					}
					var rd io.Reader
					switch coding {
					case "gzip":
						zr, err := gzip.NewReader(resp.Body)
						if err != nil {
							t.Fatal(err)
						}
						rd = zr
					case "br":
						rd = brotli.NewReader(resp.Body)
					case "zstd":
						zr, err := zstd.NewReader(resp.Body, zstd.WithDecoderConcurrency(1))
						if err != nil {
							t.Fatal(err)
						}
						defer zr.Close()
						rd = zr
					}
					<-sent
					// The backend waits: all of the first part must come
					// (the client's timeout ends a read that waits for it).
					got := make([]byte, len(htmlDoc))
					if _, err := io.ReadFull(rd, got[:part]); err != nil {
						t.Fatalf("the first %d bytes while the backend waits: %v", part, err)
					}
					resume <- struct{}{}
					if _, err := io.ReadFull(rd, got[part:]); err != nil {
						t.Fatalf("the rest: %v", err)
					}
					if !bytes.Equal(got, htmlDoc) {
						t.Fatal("the decoded body is not the backend's")
					}
				})
			}
		}
	}
}
