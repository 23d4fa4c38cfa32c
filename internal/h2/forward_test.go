package h2

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"

	"relay/internal/core"
)

// Requests over HTTP/2 reach the backends in turn, with X-Forwarded-For
// set to the client's address (a forged one replaced) and
// X-Forwarded-Proto to http.
func TestForwardsWithForwardedFields(t *testing.T) {
	f := startFront(t, newBackend(t, "a", nil), newBackend(t, "b", nil))
	cl := h2Client(t)
	seen := map[string]int{}
	for i := 0; i < 4; i++ {
		req, _ := http.NewRequest("GET", f.url+"/path?q=1", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.7") // forged: replaced
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("spoke %s, want HTTP/2", resp.Proto)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, body)
		}
		want := " GET /path?q=1 xff=127.0.0.1 proto=http"
		if got := string(body); !strings.HasSuffix(got, want) {
			t.Fatalf("backend saw %q, want it to end in %q", got, want)
		}
		seen[resp.Header.Get("X-Backend")]++
	}
	if seen["a"] != 2 || seen["b"] != 2 {
		t.Fatalf("round robin over a and b gave %v, want 2 each", seen)
	}
}

// The response head reaches the client whole: every value of a repeated
// field in order, a field the backend named in lower case, and the
// body's length.
func TestPassesResponseFieldsWhole(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Add("Set-Cookie", "a=1")
		h.Add("Set-Cookie", "b=2")
		h["x-lower"] = []string{"v"}
		h.Set("Content-Type", "text/x-relay")
		h.Add("X-Many", "1")
		h.Add("X-Many", "2")
		h.Add("X-Many", "3")
		io.WriteString(w, "twelve bytes")
	})
	f := startFront(t, b)
	resp, err := h2Client(t).Get(f.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "twelve bytes" || resp.ContentLength != 12 {
		t.Errorf("body %q with length %d, want %q with 12", body, resp.ContentLength, "twelve bytes")
	}
	for name, want := range map[string]string{
		"Set-Cookie": "a=1,b=2", "X-Lower": "v", "Content-Type": "text/x-relay", "X-Many": "1,2,3",
	} {
		if got := strings.Join(resp.Header.Values(name), ","); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// HTTP/2 has no connection-specific fields (RFC 9113 8.2.2): a request
// carrying one is malformed and reset without reaching a backend, while
// "te: trailers", the one TE allowed, is accepted and not forwarded.
func TestRefusesConnectionSpecificRequestFields(t *testing.T) {
	var reached atomic.Int32
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		fmt.Fprintf(w, "te=%q", r.Header.Get("Te"))
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	id := uint32(1)
	for _, field := range [][2]string{
		{"connection", "x-secret"},
		{"keep-alive", "timeout=5"},
		{"proxy-connection", "keep-alive"},
		{"transfer-encoding", "chunked"},
		{"upgrade", "websocket"},
		{"te", "gzip"},
	} {
		rc.get(id, "/", field[0], field[1])
		r := rc.response(id)
		if !r.reset || r.code != http2.ErrCodeProtocol || r.status != 0 {
			t.Errorf("%s: %s: status %d, reset %v (%v); want RST_STREAM PROTOCOL_ERROR", field[0], field[1], r.status, r.reset, r.code)
		}
		id += 2
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("%d malformed requests reached the backend", n)
	}
	rc.get(id, "/", "te", "trailers")
	r := rc.response(id)
	if r.status != 200 || string(r.body) != `te=""` {
		t.Errorf("with te: trailers: status %d, backend saw %q; want 200 and no TE", r.status, r.body)
	}
}

// Hop-by-hop fields of the backend's response stay behind, those named
// by its Connection field too; the others and the body pass.
func TestStripsHopByHopResponseFields(t *testing.T) {
	b := rawBackend(t, func(w *bufio.Writer, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		io.WriteString(w, "HTTP/1.1 200 OK\r\n"+
			"Connection: keep-alive, X-Hop\r\n"+
			"X-Hop: only for relay\r\n"+
			"Keep-Alive: timeout=5\r\n"+
			"Proxy-Connection: keep-alive\r\n"+
			"X-End: kept\r\n"+
			"Transfer-Encoding: chunked\r\n"+
			"\r\n"+
			"5\r\nhello\r\n0\r\n\r\n")
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	rc.get(1, "/")
	r := rc.response(1)
	if r.status != 200 || string(r.body) != "hello" || !r.ended {
		t.Fatalf("status %d, body %q, ended %v; want 200 hello", r.status, r.body, r.ended)
	}
	for _, name := range []string{"connection", "x-hop", "keep-alive", "proxy-connection", "transfer-encoding"} {
		if v := r.get(name); v != nil {
			t.Errorf("%s: %q reached the client", name, v)
		}
	}
	if v := r.get("x-end"); !slices.Equal(v, []string{"kept"}) {
		t.Errorf("x-end: %q, want [kept]", v)
	}
}

// An HTTP/2 client may split its cookies into several fields; the backend
// gets them as one Cookie field joined by "; " (RFC 9113 8.2.3), in
// order, even with another field between them.
func TestJoinsCookieFields(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%q", r.Header.Values("Cookie"))
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	rc.get(1, "/", "cookie", "a=1", "x-other", "o", "cookie", "b=2", "cookie", "c=3")
	r := rc.response(1)
	if want := `["a=1; b=2; c=3"]`; r.status != 200 || string(r.body) != want {
		t.Errorf("status %d, backend saw cookies %s; want %s", r.status, r.body, want)
	}
	// One cookie field is passed as it is.
	rc.get(3, "/", "cookie", "only=1")
	if r := rc.response(3); string(r.body) != `["only=1"]` {
		t.Errorf("a single cookie: backend saw %s", r.body)
	}
}

// A body whose length nobody knows in advance goes upstream chunked and
// arrives whole.
func TestStreamsRequestBodyOfUnknownLength(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d %v", n, r.TransferEncoding)
	})
	f := startFront(t, b)
	const size = 1 << 20
	pr, pw := io.Pipe()
	go func() {
		chunk := strings.Repeat("x", 1000)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := io.WriteString(pw, chunk[:min(len(chunk), size-sent)]); err != nil {
				return
			}
		}
		pw.Close()
	}()
	defer pr.Close()
	req, _ := http.NewRequest("POST", f.url+"/upload", pr)
	resp, err := h2Client(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != fmt.Sprintf("%d [chunked]", size) {
		t.Fatalf("status %d, backend said %q; want %d bytes, chunked", resp.StatusCode, body, size)
	}
}

// The core's retries and error answers through this door: a dead
// backend is skipped; with every backend out the client gets relay's 503,
// and with only dead ones its 503 saying no backend is up.
func TestRetriesAnotherBackendAndAnswersErrors(t *testing.T) {
	good := newBackend(t, "good", nil)
	dead := deadBackend(t)
	f := startFront(t, dead, good)
	cl := h2Client(t)
	for i := 0; i < 4; i++ {
		resp, err := cl.Get(f.url + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "good" {
			t.Fatalf("request %d: status %d from %q, want 200 from good", i, resp.StatusCode, resp.Header.Get("X-Backend"))
		}
	}
	good.SetDisabled(true)
	dead.SetDisabled(true)
	resp, err := cl.Get(f.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(body) != "Service Unavailable: no backend available\n" ||
		resp.Header.Get("Retry-After") != core.RetryAfter || resp.ContentLength != int64(len(body)) {
		t.Fatalf("with no backend available: %d %q (length %d, Retry-After %q), want relay's 503",
			resp.StatusCode, body, resp.ContentLength, resp.Header.Get("Retry-After"))
	}

	f = startFront(t, deadBackend(t), deadBackend(t))
	resp, err = cl.Get(f.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || string(body) != "Service Unavailable: no backend is up: every one tried is unreachable\n" ||
		resp.Header.Get("Retry-After") != core.RetryAfter {
		t.Fatalf("with every backend dead: %d %q (Retry-After %q), want relay's 503 saying no backend is up",
			resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
}

// A HEAD request gets the response head, with its content-length, in one
// HEADERS frame that ends the stream: no DATA, from a backend or from
// relay's own error answer.
func TestHeadGetsHeadersWithoutData(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1234")
		w.Header().Set("X-Method", r.Method)
		w.WriteHeader(200)
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	rc.writeHeaders(1, true, request("HEAD", "/")...)
	r := rc.response(1)
	if r.status != 200 || !slices.Equal(r.get("content-length"), []string{"1234"}) || !slices.Equal(r.get("x-method"), []string{"HEAD"}) {
		t.Errorf("status %d, fields %v; want 200 with content-length 1234 from a HEAD", r.status, r.fields)
	}
	if !slices.Equal(r.frames, []http2.FrameType{http2.FrameHeaders}) || !r.ended {
		t.Errorf("frames %v, ended %v; want one HEADERS ending the stream", r.frames, r.ended)
	}

	b.SetDisabled(true)
	rc.writeHeaders(3, true, request("HEAD", "/")...)
	r = rc.response(3)
	want := fmt.Sprint(len("Service Unavailable: no backend available\n"))
	if r.status != 503 || !slices.Equal(r.get("content-length"), []string{want}) {
		t.Errorf("relay's 503: status %d, fields %v; want 503 with content-length %s", r.status, r.fields, want)
	}
	if !slices.Equal(r.frames, []http2.FrameType{http2.FrameHeaders}) || !r.ended {
		t.Errorf("relay's 503: frames %v, ended %v; want one HEADERS ending the stream", r.frames, r.ended)
	}
}

// An informational response other than 100 (103 Early Hints) reaches the
// client before the final one.
func TestPassesEarlyHints(t *testing.T) {
	b := newBackend(t, "a", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(103)
		io.WriteString(w, "final")
	})
	f := startFront(t, b)
	rc := dialRaw(t, f.addr)
	rc.get(1, "/")
	r := rc.response(1)
	if !slices.Equal(r.interim, []int{103}) || r.status != 200 || string(r.body) != "final" {
		t.Errorf("interim %v, status %d, body %q; want 103 then 200 final", r.interim, r.status, r.body)
	}
}
