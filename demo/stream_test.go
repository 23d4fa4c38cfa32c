package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// window holds the download pattern with 25 extra bytes, so window[i%26:]
// starts with the pattern's bytes from any offset i on, up to 64 KiB of them.
var window = func() []byte {
	w := make([]byte, 64<<10+25)
	for i := range w {
		w[i] = 'a' + byte(i%26)
	}
	return w
}()

// letters is an endless reader of the download pattern, for uploads.
type letters struct{ i int64 }

func (l *letters) Read(p []byte) (int, error) {
	p = p[:min(len(p), 64<<10)]
	n := copy(p, window[l.i%26:])
	l.i += int64(n)
	return n, nil
}

// checkPattern reads r to its end, checks it is the download pattern, and
// returns its length.
func checkPattern(t *testing.T, r io.Reader) int64 {
	t.Helper()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := r.Read(buf)
		if !bytes.Equal(buf[:k], window[n%26:n%26+int64(k)]) {
			t.Fatalf("bytes %d to %d are not the pattern", n, n+int64(k))
		}
		n += int64(k)
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("reading body after %d bytes: %v", n, err)
		}
	}
}

func TestEcho(t *testing.T) {
	srv := httptest.NewServer(Handler("8001", nil))
	defer srv.Close()
	type reply struct {
		Method           string              `json:"method"`
		Path             string              `json:"path"`
		Proto            string              `json:"proto"`
		Host             string              `json:"host"`
		Headers          map[string][]string `json:"headers"`
		BodyLength       int64               `json:"body_length"`
		RemoteAddr       string              `json:"remote_addr"`
		TransferEncoding []string            `json:"transfer_encoding"`
		Trailers         map[string][]string `json:"trailers"`
	}
	tests := []struct {
		name, method, target string
		body                 int64 // bytes to send; -1 sends none
		chunked              bool
		trailer              string
	}{
		{name: "get", method: http.MethodGet, target: "/echo", body: -1},
		{name: "post with query", method: http.MethodPost, target: "/echo?a=1&b=two%20words", body: 1 << 20},
		{name: "any subpath", method: http.MethodPut, target: "/echo/deeper/path?x", body: 10},
		{name: "chunked with trailer", method: http.MethodPost, target: "/echo", body: 100_000, chunked: true,
			trailer: "done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body >= 0 {
				body = io.LimitReader(&letters{}, tt.body)
			}
			req, err := http.NewRequest(tt.method, srv.URL+tt.target, body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = max(tt.body, 0)
			req.Header.Add("X-Test", "one")
			req.Header.Add("x-test", "two")
			if tt.chunked {
				req.ContentLength = -1
				req.Body = io.NopCloser(io.MultiReader(body, readFunc(func() { req.Trailer.Set("X-Sum", tt.trailer) })))
				req.Trailer = http.Header{"X-Sum": nil}
			}
			// Dial by hand to learn the client's own address.
			var local string
			tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err == nil {
					local = c.LocalAddr().String()
				}
				return c, err
			}}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var got reply
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			want := reply{
				Method:     tt.method,
				Path:       tt.target,
				Proto:      "HTTP/1.1",
				Host:       strings.TrimPrefix(srv.URL, "http://"),
				BodyLength: max(tt.body, 0),
				RemoteAddr: local,
			}
			if got.Method != want.Method || got.Path != want.Path || got.Proto != want.Proto || got.Host != want.Host ||
				got.BodyLength != want.BodyLength || got.RemoteAddr != want.RemoteAddr {
				t.Errorf("echo %+v\nwant %+v", got, want)
			}
			if v := got.Headers["X-Test"]; !slices.Equal(v, []string{"one", "two"}) {
				t.Errorf("X-Test %q, want [one two] under its canonical name; headers %v", v, got.Headers)
			}
			if tt.chunked {
				if !slices.Equal(got.TransferEncoding, []string{"chunked"}) {
					t.Errorf("transfer_encoding %q, want [chunked]", got.TransferEncoding)
				}
				if v := got.Trailers["X-Sum"]; !slices.Equal(v, []string{tt.trailer}) {
					t.Errorf("trailer X-Sum %q, want %q", v, tt.trailer)
				}
			} else if len(got.TransferEncoding) != 0 || len(got.Trailers) != 0 {
				t.Errorf("unexpected transfer_encoding %q or trailers %v", got.TransferEncoding, got.Trailers)
			}
		})
	}
}

// readFunc is an empty reader that runs f when it is first read, which is
// after everything before it in a MultiReader was sent.
type readFunc func()

func (f readFunc) Read([]byte) (int, error) {
	f()
	return 0, io.EOF
}

func TestDownload(t *testing.T) {
	srv := httptest.NewServer(Handler("8001", nil))
	defer srv.Close()
	tests := []struct {
		name    string
		size    int64
		chunked bool
	}{
		{name: "empty", size: 0},
		{name: "one byte", size: 1},
		{name: "one pattern round", size: 26},
		{name: "across buffer refills", size: patternLen*3 + 5},
		{name: "10 MiB", size: 10 << 20},
		{name: "empty chunked", size: 0, chunked: true},
		{name: "one byte chunked", size: 1, chunked: true},
		{name: "10 MiB chunked", size: 10 << 20, chunked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := fmt.Sprintf("%s/download?size=%d", srv.URL, tt.size)
			if tt.chunked {
				target += "&chunked=1"
			}
			resp, err := srv.Client().Get(target)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if tt.chunked {
				if resp.ContentLength != -1 || !slices.Equal(resp.TransferEncoding, []string{"chunked"}) {
					t.Errorf("Content-Length %d, Transfer-Encoding %q; want none and chunked",
						resp.ContentLength, resp.TransferEncoding)
				}
			} else if resp.ContentLength != tt.size || resp.TransferEncoding != nil {
				t.Errorf("Content-Length %d, Transfer-Encoding %q; want %d and none",
					resp.ContentLength, resp.TransferEncoding, tt.size)
			}
			if n := checkPattern(t, resp.Body); n != tt.size {
				t.Errorf("got %d bytes, want %d", n, tt.size)
			}
		})
	}
}

func TestDownloadRejects(t *testing.T) {
	srv := httptest.NewServer(Handler("8001", nil))
	defer srv.Close()
	tests := []struct {
		name, method, target string
		wantCode             int
	}{
		{"no size", http.MethodGet, "/download", 400},
		{"negative size", http.MethodGet, "/download?size=-1", 400},
		{"size not a number", http.MethodGet, "/download?size=1k", 400},
		{"bad chunked", http.MethodGet, "/download?size=1&chunked=maybe", 400},
		{"post", http.MethodPost, "/download?size=1", 405},
		{"head", http.MethodHead, "/download?size=12345", 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := do(t, srv, tt.method, tt.target, nil)
			if resp.StatusCode != tt.wantCode {
				t.Errorf("status %d, want %d (%q)", resp.StatusCode, tt.wantCode, body)
			}
			if tt.method == http.MethodHead && (resp.ContentLength != 12345 || body != "") {
				t.Errorf("HEAD: Content-Length %d and %d body bytes, want 12345 and none", resp.ContentLength, len(body))
			}
		})
	}
}

func TestUpload(t *testing.T) {
	srv := httptest.NewServer(Handler("8001", nil))
	defer srv.Close()
	tests := []struct {
		name    string
		size    int64
		chunked bool
	}{
		{name: "empty", size: 0},
		{name: "small", size: 1000},
		{name: "32 MiB", size: 32 << 20},
		{name: "32 MiB chunked", size: 32 << 20, chunked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/upload", io.LimitReader(&letters{}, tt.size))
			req.ContentLength = tt.size
			if tt.chunked {
				req.ContentLength = -1
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got struct {
				Bytes *int64 `json:"bytes"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || got.Bytes == nil || *got.Bytes != tt.size {
				t.Errorf("status %d, bytes %v; want 200 and %d", resp.StatusCode, got.Bytes, tt.size)
			}
		})
	}
}

// TestStreamingMemory moves 64 MiB each way through a real connection and
// checks that neither direction allocates anything like the body's size: the
// download comes from a fixed buffer and the upload is counted, not kept.
func TestStreamingMemory(t *testing.T) {
	const size = 64 << 20
	const budget = 8 << 20
	srv := httptest.NewServer(Handler("8001", nil))
	defer srv.Close()

	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	for _, chunked := range []string{"0", "1"} {
		got := allocated(func() {
			resp, err := srv.Client().Get(fmt.Sprintf("%s/download?size=%d&chunked=%s", srv.URL, size, chunked))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if n, err := drain(resp.Body); err != nil || n != size {
				t.Fatalf("download chunked=%s: %d bytes, %v", chunked, n, err)
			}
		})
		if got > budget {
			t.Errorf("a %d MiB download (chunked=%s) allocated %d MiB", size>>20, chunked, got>>20)
		}
		t.Logf("a %d MiB download (chunked=%s) allocated %d KiB", size>>20, chunked, got>>10)
	}
	got := allocated(func() {
		resp, err := srv.Client().Post(srv.URL+"/upload", "application/octet-stream", io.LimitReader(&letters{}, size))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		drain(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("upload status %d", resp.StatusCode)
		}
	})
	if got > budget {
		t.Errorf("a %d MiB upload allocated %d MiB", size>>20, got>>20)
	}
	t.Logf("a %d MiB upload allocated %d KiB", size>>20, got>>10)
}

// drain reads r to its end in large pieces; io.Copy to io.Discard would read
// 8 KiB at a time, which is slow under the race detector.
func drain(r io.Reader) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{r}, make([]byte, 1<<20))
}
