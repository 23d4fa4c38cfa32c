package h1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// FuzzDifferential checks relay against Go's net/http on the same bytes:
// whenever relay accepts a request, head and body, net/http must accept it
// too and agree on the method, the target, the host, the body and, above
// all, where the request ends. A disagreement about the end is exactly the
// desync that request smuggling exploits. Where net/http is the more
// lenient reader relay simply refuses, which is the safe direction.
//
// A few inputs are adjusted before net/http sees them, each for a reason
// RFC 9112 or RFC 9110 gives; see goInput.
func FuzzDifferential(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxFuzzInput {
			return
		}
		differential(t, in)
	})
}

func differential(t *testing.T, in []byte) {
	t.Helper()
	// A 4 KiB limit keeps every chunk-size line inside net/http's own
	// 4 KiB line limit.
	src := bytes.NewReader(in)
	r := NewReader(src, 4096, 4096)
	var req Request
	if err := r.ReadRequest(&req); err != nil {
		return
	}
	headEnd := len(in) - src.Len() - r.Buffered()
	method, target, host := string(req.Method), string(req.Target), string(req.Host)
	chunked, closeConn := req.Chunked, req.Close
	trailerDecl := false
	for i := range req.Fields {
		trailerDecl = trailerDecl || req.Fields[i].Is("trailer")
	}
	var body Body
	kind := BodyLength
	if chunked {
		kind = BodyChunked
	}
	body.Reset(r, kind, req.ContentLength)
	data, err := io.ReadAll(&body)
	if err != nil {
		return
	}
	end := len(in) - src.Len() - r.Buffered()
	rest := in[end:]

	goIn := goInput(in, headEnd, end, chunked)
	br := bufio.NewReaderSize(bytes.NewReader(goIn), 1<<17)
	greq, err := http.ReadRequest(br)
	if err != nil {
		if chunked && trailerDecl && strings.Contains(err.Error(), "bad trailer key") {
			// net/http refuses a Trailer field that announces a framing
			// field. relay drops Trailer as hop-by-hop and passes the
			// trailer section through as data; RFC 9110 section 6.6.2
			// does not ask a recipient to refuse such a message.
			return
		}
		t.Fatalf("relay accepted a request net/http refuses: %v\ninput %q", err, short(in))
	}
	gdata, err := io.ReadAll(greq.Body)
	if err != nil {
		t.Fatalf("relay read a body net/http refuses: %v\ninput %q", err, short(in))
	}
	grest, _ := io.ReadAll(br)

	if greq.Method != method {
		t.Fatalf("method: relay %q, net/http %q", method, greq.Method)
	}
	if uri := greq.RequestURI; strings.HasPrefix(uri, "/") || uri == "*" {
		if uri != target || greq.Host != host {
			t.Fatalf("target: relay %q host %q, net/http %q host %q", target, host, uri, greq.Host)
		}
	} else {
		// Absolute form: relay keeps the path and moves the authority
		// to Host.
		_, authPath, _ := strings.Cut(uri, "://")
		if authPath != host+target && !(target == "/" && authPath == host) || greq.Host != host {
			t.Fatalf("absolute target: relay %q host %q, net/http %q host %q", target, host, uri, greq.Host)
		}
	}
	if !bytes.Equal(gdata, data) {
		t.Fatalf("body: relay %q, net/http %q\ninput %q", data, gdata, short(in))
	}
	if !bytes.Equal(grest, rest) {
		t.Fatalf("message end: relay leaves %q, net/http leaves %q\ninput %q", short(rest), short(grest), short(in))
	}
	if greq.Close != closeConn {
		t.Fatalf("close: relay %v, net/http %v\ninput %q", closeConn, greq.Close, short(in))
	}
}

// goInput returns the bytes to hand net/http: the input with the first
// request, which relay read as in[:headEnd] plus a body up to end,
// adjusted where relay is right to accept what net/http refuses:
//
//   - Empty lines before the request line are dropped. RFC 9112 section
//     2.2 says a server SHOULD ignore them; net/http's server does, but
//     http.ReadRequest alone does not.
//   - A Content-Length list of identical values ("5, 5") becomes the one
//     value. RFC 9110 section 8.6 lets a recipient either refuse it or
//     replace it by the single value; relay does the latter, net/http the
//     former.
//   - Whitespace before the ";" of a chunk extension is dropped. RFC 9112
//     section 7.1.1 allows it (BWS); net/http reads "5 ;x" as size "5 ".
//   - Chunk extensions are dropped once they exceed net/http's overhead
//     allowance (16 KiB beyond 16 bytes plus twice the data per chunk),
//     a resource limit rather than a framing rule.
//
// Everything after end is left alone, so both parsers must leave the same
// bytes for the next request.
func goInput(in []byte, headEnd, end int, chunked bool) []byte {
	skip := 0
	for skip+2 <= headEnd && in[skip] == '\r' && in[skip+1] == '\n' {
		skip += 2
	}
	var out []byte
	for _, line := range bytes.SplitAfter(in[skip:headEnd], []byte("\r\n")) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && equalFold(name, "content-length") && bytes.IndexByte(value, ',') >= 0 {
			first, _, _ := bytes.Cut(value, []byte(","))
			line = []byte(string(name) + ": " + string(bytes.TrimSpace(first)) + "\r\n")
		}
		out = append(out, line...)
	}
	body := in[headEnd:end]
	if chunked {
		body = goChunked(body)
	}
	out = append(out, body...)
	return append(out, in[end:]...)
}

// goChunked rewrites a chunked body that relay accepted as described at
// goInput. It reads the chunk lines itself, independently of relay's
// decoder, so a framing mistake in relay still shows up as a mismatch.
func goChunked(b []byte) []byte {
	var out []byte
	var excess int64
	for {
		i := bytes.Index(b, []byte("\r\n"))
		if i < 0 {
			return append(out, b...)
		}
		line := b[:i]
		digits := 0
		for digits < len(line) && isHex(line[digits]) {
			digits++
		}
		size := line[:digits]
		ext := bytes.TrimLeft(line[digits:], " \t")
		var n int64
		for _, c := range size {
			n = n<<4 | int64(unhex(c))
		}
		// net/http's allowance, computed as its chunked reader does.
		next := max(excess+int64(len(size)+len(ext))+2-16-2*n, 0)
		if next > 16<<10 {
			ext = nil
			next = max(excess+int64(len(size))+2-16-2*n, 0)
		}
		excess = next
		out = append(append(append(out, size...), ext...), '\r', '\n')
		b = b[i+2:]
		if n == 0 {
			return append(out, b...) // trailers and whatever follows
		}
		if int64(len(b)) < n+2 {
			return append(out, b...)
		}
		out = append(out, b[:n+2]...)
		b = b[n+2:]
	}
}

// short abbreviates long inputs in failure messages; the fuzzer keeps the
// whole input in testdata anyway.
func short(b []byte) string {
	if len(b) <= 600 {
		return string(b)
	}
	return string(b[:300]) + fmt.Sprintf("...(%d bytes)...", len(b)-600) + string(b[len(b)-300:])
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// TestDifferentialCases runs the differential check on requests that
// exercise each adjustment, so plain go test covers them.
func TestDifferentialCases(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"leading empty lines", "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nNEXT"},
		{"length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabcNEXT"},
		{"chunk extension after whitespace", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3 ;x\r\nabc\r\n0\r\n\r\nNEXT"},
		{"long chunk extensions", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" +
			strings.Repeat("1;"+strings.Repeat("e", 4000)+"\r\nx\r\n", 8) + "0\r\n\r\nNEXT"},
		{"trailer declaring a framing field", "POST / HTTP/1.1\r\nHost: a\r\nTrailer: Content-Length\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"absolute form", "GET http://a:1/p?q HTTP/1.1\r\nHost: b\r\n\r\n"},
		{"absolute form without path", "GET http://a HTTP/1.1\r\nHost: b\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each case must be one relay accepts, or it tests nothing.
			var req Request
			r := NewReader(strings.NewReader(tt.in), 4096, 4096)
			if err := r.ReadRequest(&req); err != nil {
				t.Fatalf("relay refused: %v", err)
			}
			differential(t, []byte(tt.in))
		})
	}
}
