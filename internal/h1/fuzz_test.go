package h1

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// maxFuzzInput bounds fuzz inputs so memory stays small whatever the
// fuzzer tries; the parsers themselves never allocate more than the
// Reader's limit.
const maxFuzzInput = 64 << 10

// requestSeeds are valid requests and the classic smuggling shapes.
var requestSeeds = []string{
	"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
	"GET /a/b?c=d&e HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent: Mozilla/5.0\r\nAccept: text/html,*/*;q=0.8\r\nAccept-Language: en-US,en;q=0.5\r\nAccept-Encoding: gzip, deflate, br\r\nCookie: a=b; c=d\r\nConnection: keep-alive\r\n\r\n",
	"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
	"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6 ; q=\"x\"\r\n world\r\n0\r\nX-Sum: 1\r\n\r\n",
	"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
	"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET http://example.com:81/p?q HTTP/1.1\r\nHost: ignored\r\n\r\n",
	"GET HTTPS://[::1]:443 HTTP/1.1\r\nHost: x\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.0\r\n\r\n",
	"GET / HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi",
	"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: x\r\n\r\n",
	"PUT /f HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
	"POST / HTTP/1.1\r\nHost: a\r\nConnection: x-a, close\r\nX-A: 1\r\nKeep-Alive: 1\r\nTE: trailers\r\nContent-Length: 0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTrailer: X-Sum\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Sum: 0\r\n\r\n",
	// Smuggling shapes; relay must refuse all of these.
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n5c\r\nGPOST / HTTP/1.1\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
	"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 05\r\nContent-Length: 5\r\n\r\nhello",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\x0bchunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked,\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nX: y\r\n Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;\nx\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2;a=\"\r\n\"\r\nhi\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
	"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: a\n\r\n",
	"GET / HTTP/1.1\nHost: a\n\n",
	"GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\x00\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
	"GET / HTTP/1.1\r\nX: a\r\n\r\n",
	"GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: a:b\r\n\r\n",
	"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
	"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
	"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
}

// responseSeeds are response heads, valid and not.
var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\nuntil close",
	"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
	"HTTP/1.1 503\r\nRetry-After: 1\r\n\r\n",
	"HTTP/1.1 200 \r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nConnection: close, x-a\r\nX-A: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
	"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 2000 OK\r\n\r\n",
	"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
	"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n",
	"HTTP/2 200\r\n\r\n",
}

// chunkedSeeds are chunked bodies, valid and not.
var chunkedSeeds = []string{
	"0\r\n\r\n",
	"5\r\nhello\r\n0\r\n\r\n",
	"5;a=b;c\r\nhello\r\n6 ; d=\"e f\"\r\n world\r\n0\r\nX-Sum: 1\r\nY:\r\n\r\nrest",
	"A\r\n0123456789\r\n000\r\n\r\n",
	"1\r\n\r\r\n1\r\n\n\r\n0\r\n\r\n",
	"0x5\r\nhello\r\n0\r\n\r\n",
	"5 \r\nhello\r\n0\r\n\r\n",
	"5\nhello\r\n0\r\n\r\n",
	"3\r\nhello\r\n0\r\n\r\n",
	"fffffffffffffff\r\nx",
	"0\r\nX: a\n\r\n",
	"0\r\n X: a\r\n\r\n",
	"-1\r\n\r\n",
}

// parseError checks that err is one of the errors the parsers document.
func parseError(t *testing.T, err error) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) && err != ErrUnexpectedEOF {
		t.Fatalf("undocumented error %T %v", err, err)
	}
	if pe != nil && (pe.Status < 400 || pe.Status > 599) {
		t.Fatalf("error %v has status %d", pe, pe.Status)
	}
}

// isFraming reports whether a field is Content-Length or Transfer-Encoding,
// which the round trips regenerate instead of copying.
func isFraming(f *Field) bool { return f.Is("content-length") || f.Is("transfer-encoding") }

// describeFields renders the non-framing fields, with their Hop marks.
func describeFields(fields []Field, host []byte) string {
	var b bytes.Buffer
	sawHost := false
	for i := range fields {
		f := &fields[i]
		if isFraming(f) {
			continue
		}
		value := f.Value
		if f.Is("host") {
			sawHost, value = true, host
		}
		fmt.Fprintf(&b, "%s: %q hop=%v\n", f.Name, value, f.Hop)
	}
	if !sawHost && len(host) > 0 {
		fmt.Fprintf(&b, "Host: %q hop=true\n", host)
	}
	return b.String()
}

func describeRequest(req *Request) string {
	return fmt.Sprintf("%q %q host=%q minor=%d len=%d chunked=%v close=%v upgrade=%v/%q expect=%v\n%s",
		req.Method, req.Target, req.Host, req.Minor, req.ContentLength, req.Chunked, req.Close,
		req.Upgrade, req.UpgradeProto, req.Expect100, describeFields(req.Fields, req.Host))
}

// serializeRequest writes req back out in origin form with every field,
// Host carrying the authority relay settled on and framing regenerated.
func serializeRequest(req *Request) []byte {
	out := AppendRequestLine(nil, req.Method, req.Target)
	if req.Minor == 0 {
		out[len(out)-3] = '0' // AppendRequestLine always writes HTTP/1.1
	}
	sawHost := false
	for i := range req.Fields {
		f := &req.Fields[i]
		switch {
		case isFraming(f):
		case f.Is("host"):
			sawHost = true
			out = AppendField(out, f.Name, req.Host)
		default:
			out = AppendField(out, f.Name, f.Value)
		}
	}
	if !sawHost && len(req.Host) > 0 {
		out = AppendField(out, []byte("Host"), req.Host)
	}
	switch {
	case req.Chunked:
		out = AppendFieldString(out, "Transfer-Encoding", "chunked")
	case req.ContentLength > 0:
		out = AppendContentLength(out, req.ContentLength)
	}
	return append(out, '\r', '\n')
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxFuzzInput {
			return
		}
		skip := 0
		for len(in) >= skip+2 && in[skip] == '\r' && in[skip+1] == '\n' {
			skip += 2
		}
		var req Request
		perr := ParseRequest(in[skip:], &req)
		if perr != nil {
			parseError(t, perr)
		}

		// The Reader, fed a byte at a time with a tiny buffer, must
		// agree with ParseRequest on the same head.
		var rreq Request
		r := NewReader(iotest.OneByteReader(bytes.NewReader(in)), 8, maxFuzzInput)
		rerr := r.ReadRequest(&rreq)
		switch {
		case rerr == nil && perr != nil:
			t.Fatalf("Reader accepted what ParseRequest refused (%v)", perr)
		case rerr == nil && describeRequest(&rreq) != describeRequest(&req):
			t.Fatalf("Reader and ParseRequest differ:\n%s\n%s", describeRequest(&rreq), describeRequest(&req))
		case perr == nil && rerr != nil:
			t.Fatalf("ParseRequest accepted what the Reader refused (%v)", rerr)
		}
		if perr != nil {
			return
		}

		// What relay accepted, written out again, parses to the same
		// message.
		want := describeRequest(&req)
		out := serializeRequest(&req)
		var again Request
		if err := ParseRequest(out, &again); err != nil {
			t.Fatalf("re-serialised request refused: %v\n%q", err, out)
		}
		if got := describeRequest(&again); got != want {
			t.Fatalf("round trip changed the request:\n got %s\nwant %s\nwire %q", got, want, out)
		}
	})
}

func describeResponse(resp *Response) string {
	return fmt.Sprintf("minor=%d status=%d reason=%q body=%d len=%d close=%v\n%s",
		resp.Minor, resp.Status, resp.Reason, resp.Body, resp.ContentLength, resp.Close, describeFields(resp.Fields, nil))
}

func FuzzParseResponse(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, isHead bool) {
		if len(in) > maxFuzzInput {
			return
		}
		var resp Response
		perr := ParseResponse(in, &resp, isHead)
		if perr != nil {
			parseError(t, perr)
		}
		var rresp Response
		r := NewReader(iotest.OneByteReader(bytes.NewReader(in)), 8, maxFuzzInput)
		rerr := r.ReadResponse(&rresp, isHead)
		// The Reader skips empty lines before a head; ParseResponse
		// is handed heads that start at their first line.
		if !bytes.HasPrefix(in, []byte("\r\n")) {
			switch {
			case rerr == nil && perr != nil:
				t.Fatalf("Reader accepted what ParseResponse refused (%v)", perr)
			case perr == nil && rerr != nil:
				t.Fatalf("ParseResponse accepted what the Reader refused (%v)", rerr)
			case rerr == nil && describeResponse(&rresp) != describeResponse(&resp):
				t.Fatalf("Reader and ParseResponse differ:\n%s\n%s", describeResponse(&rresp), describeResponse(&resp))
			}
		}
		if perr != nil {
			return
		}
		if resp.Status < 100 || resp.Status > 999 {
			t.Fatalf("status %d accepted", resp.Status)
		}
		if resp.Body == BodyClose && !resp.Close {
			t.Fatal("close-delimited body on a connection kept open")
		}

		want := describeResponse(&resp)
		out := AppendStatusLine(nil, resp.Status, resp.Reason)
		if resp.Minor == 0 {
			out[len("HTTP/1.")] = '0'
		}
		for i := range resp.Fields {
			if f := &resp.Fields[i]; !isFraming(f) {
				out = AppendField(out, f.Name, f.Value)
			}
		}
		chunked := false
		for i := range resp.Fields {
			if f := &resp.Fields[i]; f.Is("transfer-encoding") {
				chunked = true
			}
		}
		if chunked {
			out = AppendFieldString(out, "Transfer-Encoding", "chunked")
		}
		if resp.ContentLength >= 0 {
			out = AppendContentLength(out, resp.ContentLength)
		}
		out = append(out, '\r', '\n')
		var again Response
		if err := ParseResponse(out, &again, isHead); err != nil {
			t.Fatalf("re-serialised response refused: %v\n%q", err, out)
		}
		got := describeResponse(&again)
		if len(resp.Reason) == 0 {
			// An empty reason is written as the standard one.
			again.Reason = nil
			got = describeResponse(&again)
		}
		if got != want {
			t.Fatalf("round trip changed the response:\n got %s\nwant %s\nwire %q", got, want, out)
		}
	})
}

// decodeChunked reads a chunked body from in through a Reader of the given
// initial size, a byte at a time when oneByte is set.
func decodeChunked(in []byte, size int, oneByte bool) (data, trailers []byte, consumed int, err error) {
	src := bytes.NewReader(in)
	var rd io.Reader = src
	if oneByte {
		rd = iotest.OneByteReader(src)
	}
	r := NewReader(rd, size, 4096)
	var b Body
	b.Reset(r, BodyChunked, 0)
	data, err = io.ReadAll(&b)
	consumed = len(in) - src.Len() - r.Buffered()
	return data, bytes.Clone(b.Trailers()), consumed, err
}

func FuzzChunked(f *testing.F) {
	for _, s := range chunkedSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > maxFuzzInput {
			return
		}
		data, trailers, consumed, err := decodeChunked(in, 4096, false)
		// Buffer sizes and read sizes must not change the outcome.
		data2, trailers2, consumed2, err2 := decodeChunked(in, 1, true)
		if err != err2 {
			t.Fatalf("errors differ with one-byte reads: %v vs %v", err, err2)
		}
		if err != nil {
			parseError(t, err)
			return
		}
		if !bytes.Equal(data, data2) || !bytes.Equal(trailers, trailers2) || consumed != consumed2 {
			t.Fatal("one-byte reads decoded differently")
		}
		if len(data) > consumed || consumed > len(in) {
			t.Fatalf("decoded %d bytes from %d consumed of %d", len(data), consumed, len(in))
		}

		// Re-encode in chunks of varying size and decode again.
		var enc []byte
		for rest, n := data, 1; len(rest) > 0; n = n*3 + 1 {
			k := min(n, len(rest))
			enc = AppendChunkHeader(enc, k)
			enc = append(append(enc, rest[:k]...), '\r', '\n')
			rest = rest[k:]
		}
		enc = AppendLastChunk(enc, trailers)
		enc = append(enc, "NEXT"...)
		data3, trailers3, consumed3, err := decodeChunked(enc, 64, false)
		if err != nil {
			t.Fatalf("re-encoded body refused: %v\n%q", err, enc)
		}
		if !bytes.Equal(data3, data) || !bytes.Equal(trailers3, trailers) || consumed3 != len(enc)-len("NEXT") {
			t.Fatalf("round trip changed the body:\n%q %q\n%q %q", data3, trailers3, data, trailers)
		}
	})
}
