package h1

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// summary renders what a parsed request says, for comparing two parses.
func summary(req *Request) string {
	var b strings.Builder
	b.WriteString(string(req.Method) + " " + string(req.Target) + " host=" + string(req.Host))
	for _, f := range req.Fields {
		b.WriteString("|" + string(f.Name) + "=" + string(f.Value))
		if f.Hop {
			b.WriteString("(hop)")
		}
	}
	return b.String()
}

// readAll reads every request on r, with its body, until io.EOF, and
// returns each summary followed by its body.
func readAll(t *testing.T, r *Reader) []string {
	t.Helper()
	var (
		out  []string
		req  Request
		body Body
	)
	for {
		err := r.ReadRequest(&req)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("request %d: %v", len(out), err)
		}
		s := summary(&req) // before the body overwrites the head
		kind := BodyLength
		if req.Chunked {
			kind = BodyChunked
		}
		body.Reset(r, kind, req.ContentLength)
		data, err := io.ReadAll(&body)
		if err != nil {
			t.Fatalf("body %d: %v", len(out), err)
		}
		out = append(out, s+" body="+string(data)+" trailers="+string(body.Trailers()))
	}
}

const pipeline = "GET /one HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n" +
	"POST /two HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello" +
	"\r\n\r\n" + // empty lines between requests are allowed
	"PUT /three HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nX-Sum: 1\r\n\r\n" +
	"GET /four HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n"

func TestReaderPipelined(t *testing.T) {
	got := readAll(t, NewReader(strings.NewReader(pipeline), 4096, 4096))
	want := []string{
		"GET /one host=a|Host=a(hop)|Accept=*/* body= trailers=",
		"POST /two host=a|Host=a(hop)|Content-Length=5(hop) body=hello trailers=",
		"PUT /three host=a|Host=a(hop)|Transfer-Encoding=chunked(hop) body=abc trailers=X-Sum: 1\r\n",
		"GET /four host=b|Host=b(hop)|Connection=close(hop) body= trailers=",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// TestReaderSplitReads checks that heads and bodies arriving in pieces of
// any size, from one byte up, parse exactly as when they arrive at once,
// with buffers small enough to force growth and compaction.
func TestReaderSplitReads(t *testing.T) {
	want := readAll(t, NewReader(strings.NewReader(pipeline), 4096, 4096))
	tests := []struct {
		name string
		rd   func() io.Reader
		size int
	}{
		{"one byte reads", func() io.Reader { return iotest.OneByteReader(strings.NewReader(pipeline)) }, 16},
		{"half reads", func() io.Reader { return iotest.HalfReader(strings.NewReader(pipeline)) }, 8},
		{"data with EOF", func() io.Reader { return iotest.DataErrReader(strings.NewReader(pipeline)) }, 32},
		{"one byte buffer", func() io.Reader { return strings.NewReader(pipeline) }, 1},
		{"zero buffer", func() io.Reader { return strings.NewReader(pipeline) }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readAll(t, NewReader(tt.rd(), tt.size, 4096))
			if !slices.Equal(got, want) {
				t.Fatalf("got  %q\nwant %q", got, want)
			}
		})
	}
}

func TestReaderEOF(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  error // from the last ReadRequest
	}{
		{"nothing", "", io.EOF},
		{"after a request", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", io.EOF},
		{"after empty lines", "GET / HTTP/1.1\r\nHost: a\r\n\r\n\r\n\r\n", io.EOF},
		{"inside the request line", "GET / HT", ErrUnexpectedEOF},
		{"inside the fields", "GET / HTTP/1.1\r\nHost: a\r\n", ErrUnexpectedEOF},
		{"before the last LF", "GET / HTTP/1.1\r\nHost: a\r\n\r", ErrUnexpectedEOF},
		{"after a lone CR", "\r", ErrUnexpectedEOF},
		{"inside the next request", "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /", ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(iotest.OneByteReader(strings.NewReader(tt.input)), 8, 1024)
			var req Request
			var err error
			for err == nil {
				err = r.ReadRequest(&req)
			}
			if err != tt.want {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestReaderLeadingEmptyLines(t *testing.T) {
	r := NewReader(strings.NewReader("\r\n\r\n\r\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n"), 4, 256)
	var req Request
	if err := r.ReadRequest(&req); err != nil {
		t.Fatal(err)
	}
	if string(req.Target) != "/x" {
		t.Fatalf("target %q", req.Target)
	}
	// A bare LF is not an empty line.
	r = NewReader(strings.NewReader("\nGET /x HTTP/1.1\r\nHost: a\r\n\r\n"), 64, 256)
	checkErr(t, r.ReadRequest(&req), ErrBareLF, 400)
}

func TestReaderHeadTooLarge(t *testing.T) {
	const max = 256
	head := func(n int) string { // a request head of exactly n bytes
		const start, end = "GET / HTTP/1.1\r\nHost: a\r\nX: ", "\r\n\r\n"
		return start + strings.Repeat("v", n-len(start)-len(end)) + end
	}
	tests := []struct {
		name  string
		input string
		want  error
	}{
		{"exactly the limit", head(max), nil},
		{"exactly the limit, more queued", head(max) + "GET / HTTP/1.1\r\n", nil},
		{"one byte over", head(max + 1), ErrHeadTooLarge},
		{"far over", head(10 * max), ErrHeadTooLarge},
		{"endless request line", "GET /" + strings.Repeat("a", 4*max), ErrHeadTooLarge},
		{"empty lines do not count", strings.Repeat("\r\n", 4*max) + head(max), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.input), 16, max)
			var req Request
			err := r.ReadRequest(&req)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			checkErr(t, err, tt.want, 431)
		})
	}
}

// stopReader fails the test if the Reader asks for more input than the
// bytes it was given.
type stopReader struct {
	t    *testing.T
	data []byte
}

func (s *stopReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		s.t.Error("read past the end of the given bytes")
		return 0, io.EOF
	}
	n := copy(p, s.data)
	s.data = s.data[n:]
	return n, nil
}

// TestReaderBareLFFailsFast checks that a head ended by bare LFs is
// answered at once instead of waiting for a CRLFCRLF that never comes.
func TestReaderBareLFFailsFast(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  error
	}{
		{"LF LF", "GET / HTTP/1.1\nHost: a\n\n", ErrBareLF},
		{"LF CRLF", "GET / HTTP/1.1\r\nHost: a\n\r\n", ErrBareLF},
		{"CRLF LF", "GET / HTTP/1.1\r\nHost: a\r\n\n", ErrBareLF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(&stopReader{t: t, data: []byte(tt.input)}, 64, 1024)
			var req Request
			checkErr(t, r.ReadRequest(&req), tt.want, 400)
		})
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderNoProgress(t *testing.T) {
	r := NewReader(zeroReader{}, 64, 1024)
	var req Request
	if err := r.ReadRequest(&req); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("err = %v, want io.ErrNoProgress", err)
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("GET / HTTP/1.1\r\n"), iotest.ErrReader(boom)), 64, 1024)
	var req Request
	if err := r.ReadRequest(&req); err != boom {
		t.Fatalf("err = %v, want %v", err, boom)
	}
}

func TestReaderBufferAccess(t *testing.T) {
	r := NewReader(strings.NewReader("GET / HTTP/1.1\r\nHost: a\r\n\r\nextra bytes"), 64, 1024)
	var req Request
	if err := r.ReadRequest(&req); err != nil {
		t.Fatal(err)
	}
	if got := string(r.Peek()); got != "extra bytes" || r.Buffered() != len(got) {
		t.Fatalf("Peek = %q, Buffered = %d", got, r.Buffered())
	}
	r.Discard(6)
	if got := string(r.Peek()); got != "bytes" {
		t.Fatalf("after Discard: %q", got)
	}
	p := make([]byte, 3)
	if n, err := r.Read(p); n != 3 || err != nil || string(p) != "byt" {
		t.Fatalf("Read = %d %v %q", n, err, p)
	}
	if n, err := r.Read(nil); n != 0 || err != nil {
		t.Fatalf("empty Read = %d %v", n, err)
	}

	// Reset switches connections and drops what was buffered.
	next := strings.NewReader("GET /b HTTP/1.1\r\nHost: b\r\n\r\n")
	r.Reset(next)
	if r.Buffered() != 0 || r.Underlying() != io.Reader(next) {
		t.Fatal("Reset kept state")
	}
	if err := r.ReadRequest(&req); err != nil || string(req.Target) != "/b" {
		t.Fatalf("after Reset: %v %q", err, req.Target)
	}
}

// TestReaderLargeReadBypassesBuffer checks that reads at least as large as
// the buffer go straight to the connection once the buffer is empty, and
// never take more than asked.
func TestReaderLargeReadBypassesBuffer(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100)
	src := bytes.NewReader(data)
	r := NewReader(src, 16, 16)
	p := make([]byte, 100)
	n, err := r.Read(p)
	if err != nil || n != 100 || r.Buffered() != 0 || src.Len() != len(data)-100 {
		t.Fatalf("Read = %d %v, buffered %d, source left %d", n, err, r.Buffered(), src.Len())
	}
}
