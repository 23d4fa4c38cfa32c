package h1

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readBody reads a body of the given kind from input and returns its data,
// its trailers, the bytes left after it and the error that ended it.
func readBody(input string, kind BodyKind, length int64, size int, wrap func(io.Reader) io.Reader) (data, trailers, rest string, err error) {
	src := io.Reader(strings.NewReader(input))
	if wrap != nil {
		src = wrap(src)
	}
	r := NewReader(src, size, 4096)
	var b Body
	b.Reset(r, kind, length)
	d, err := io.ReadAll(&b)
	tail, _ := io.ReadAll(r)
	return string(d), string(b.Trailers()), string(tail), err
}

func TestBodyLength(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		length int64
		data   string
		rest   string
		want   error
	}{
		{name: "exact", input: "hello", length: 5, data: "hello"},
		{name: "pipelined bytes stay", input: "helloGET / HTTP/1.1\r\n", length: 5, data: "hello", rest: "GET / HTTP/1.1\r\n"},
		{name: "zero length reads nothing", input: "GET", length: 0, rest: "GET"},
		{name: "large", input: strings.Repeat("x", 10000) + "next", length: 10000, data: strings.Repeat("x", 10000), rest: "next"},
		{name: "truncated", input: "hel", length: 5, data: "hel", want: ErrUnexpectedEOF},
		{name: "empty connection", input: "", length: 5, want: ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		for _, wrap := range []func(io.Reader) io.Reader{nil, iotest.OneByteReader, iotest.DataErrReader} {
			t.Run(tt.name, func(t *testing.T) {
				data, _, rest, err := readBody(tt.input, BodyLength, tt.length, 8, wrap)
				if err != tt.want || data != tt.data || (tt.want == nil && rest != tt.rest) {
					t.Fatalf("got %q rest %q err %v, want %q rest %q err %v", data, rest, err, tt.data, tt.rest, tt.want)
				}
			})
		}
	}
}

func TestBodyState(t *testing.T) {
	r := NewReader(strings.NewReader("abcdef"), 16, 16)
	var b Body
	b.Reset(r, BodyLength, 4)
	if b.Done() || b.Remaining() != 4 {
		t.Fatalf("fresh body: done %v remaining %d", b.Done(), b.Remaining())
	}
	p := make([]byte, 3)
	if n, err := b.Read(p); n != 3 || err != nil {
		t.Fatalf("Read = %d %v", n, err)
	}
	if b.Remaining() != 1 || b.Done() {
		t.Fatalf("remaining %d done %v", b.Remaining(), b.Done())
	}
	// The last byte comes with io.EOF, so a copy loop needs no extra call.
	if n, err := b.Read(p); n != 1 || err != io.EOF || !b.Done() {
		t.Fatalf("last Read = %d %v done %v", n, err, b.Done())
	}
	if n, err := b.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("Read after end = %d %v", n, err)
	}

	b.Reset(r, BodyNone, 100)
	if !b.Done() {
		t.Fatal("BodyNone not done at once")
	}
	if n, err := b.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("BodyNone Read = %d %v", n, err)
	}
}

func TestBodyChunked(t *testing.T) {
	tests := []struct {
		name     string
		input    string
		data     string
		trailers string
		rest     string
	}{
		{name: "one chunk", input: "5\r\nhello\r\n0\r\n\r\n", data: "hello"},
		{name: "empty body", input: "0\r\n\r\nNEXT", rest: "NEXT"},
		{name: "many chunks", input: "1\r\na\r\n2\r\nbc\r\n3\r\ndef\r\n0\r\n\r\n", data: "abcdef"},
		{name: "upper-case hex", input: "A\r\n0123456789\r\n0\r\n\r\n", data: "0123456789"},
		{name: "leading zeros", input: "005\r\nhello\r\n000\r\n\r\n", data: "hello"},
		{name: "15 hex digits of zero", input: "000000000000000\r\n\r\n"},
		{name: "extensions", input: "5;name=value;flag\r\nhello\r\n6 ; quoted=\"a b\"\r\n world\r\n0;last\r\n\r\n", data: "hello world"},
		{name: "extension after tab", input: "5\t;x\r\nhello\r\n0\r\n\r\n", data: "hello"},
		{name: "trailers", input: "5\r\nhello\r\n0\r\nX-Sum: abc\r\nX-Other:\tv w \r\n\r\nNEXT",
			data: "hello", trailers: "X-Sum: abc\r\nX-Other:\tv w \r\n", rest: "NEXT"},
		{name: "chunk data with CRLF inside", input: "4\r\n\r\n\r\n\r\n0\r\n\r\n", data: "\r\n\r\n"},
		{name: "pipelined request after", input: "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n", data: "abc", rest: "GET / HTTP/1.1\r\n"},
	}
	for _, tt := range tests {
		for _, size := range []int{1, 7, 64} {
			for _, wrap := range []func(io.Reader) io.Reader{nil, iotest.OneByteReader, iotest.DataErrReader} {
				t.Run(tt.name, func(t *testing.T) {
					data, trailers, rest, err := readBody(tt.input, BodyChunked, 0, size, wrap)
					if err != nil {
						t.Fatal(err)
					}
					if data != tt.data || trailers != tt.trailers || rest != tt.rest {
						t.Fatalf("got %q trailers %q rest %q, want %q %q %q", data, trailers, rest, tt.data, tt.trailers, tt.rest)
					}
				})
			}
		}
	}
}

func TestBodyChunkedLarge(t *testing.T) {
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB, larger than the buffer
	var in []byte
	in = AppendChunkHeader(in, len(chunk))
	in = append(append(in, chunk...), '\r', '\n')
	in = AppendLastChunk(in, nil)
	data, _, _, err := readBody(string(in), BodyChunked, 0, 512, nil)
	if err != nil || data != string(chunk) {
		t.Fatalf("err %v, got %d bytes", err, len(data))
	}
}

func TestBodyChunkedMalformed(t *testing.T) {
	tests := []struct {
		name   string
		input  string
		want   error
		status int
	}{
		{"empty size", "\r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"negative size", "-1\r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"0x prefix", "0x5\r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"space inside size", "1 0\r\n0123456789abcdef\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"not hex", "g\r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"plus sign", "+5\r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"16 hex digits", "0000000000000005\r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"size overflowing int64", "ffffffffffffffffff\r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"trailing space", "5 \r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"leading space", " 5\r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"bare LF after size", "5\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"bare LF after last size", "5\r\nhello\r\n0\n\r\n", ErrChunkSize, 400},
		{"bare CR after size", "5\rhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"extension without semicolon", "5 x\r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
		{"NUL in extension", "5;a\x00\r\nhello\r\n0\r\n\r\n", ErrChunkExtension, 400},
		{"CR in extension", "5;a\rb\r\nhello\r\n0\r\n\r\n", ErrChunkExtension, 400},
		{"missing CRLF after data", "5\r\nhello0\r\n\r\n", ErrChunkEnd, 400},
		{"data longer than size", "3\r\nhello\r\n0\r\n\r\n", ErrChunkEnd, 400},
		{"data shorter than size", "6\r\nhello\r\n0\r\n\r\n", ErrChunkEnd, 400},
		{"bare LF after data", "5\r\nhello\n0\r\n\r\n", ErrChunkEnd, 400},
		{"LF then CRLF after data", "5\r\nhello\n\r\n0\r\n\r\n", ErrChunkEnd, 400},
		{"trailer without colon", "0\r\nX-Sum\r\n\r\n", ErrTrailer, 400},
		{"trailer with space before colon", "0\r\nX-Sum : 1\r\n\r\n", ErrTrailer, 400},
		{"trailer obs-fold", "0\r\nX-Sum: 1\r\n 2\r\n\r\n", ErrTrailer, 400},
		{"trailer with control char", "0\r\nX-Sum: \x01\r\n\r\n", ErrTrailer, 400},
		{"trailer ended by bare LF", "0\r\nX-Sum: 1\n\r\n", ErrTrailer, 400},
		{"trailer line longer than the buffer", "0\r\nX-Big: " + strings.Repeat("v", 5000) + "\r\n\r\n", ErrTrailerTooLarge, 431},
		{"last chunk without blank line", "0\r\nX-A: 1\r\nX-B: 2\r\n", ErrUnexpectedEOF, 0},
		{"trailers too large", "0\r\n" + strings.Repeat("X-Big: "+strings.Repeat("v", 1000)+"\r\n", 17) + "\r\n", ErrTrailerTooLarge, 431},
		{"size line longer than the buffer", "5;" + strings.Repeat("e", 5000) + "\r\nhello\r\n0\r\n\r\n", ErrChunkSize, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := readBody(tt.input, BodyChunked, 0, 64, nil)
			checkErr(t, err, tt.want, tt.status)
		})
	}
}

// TestBodyChunkedTruncated cuts a valid chunked body at every byte and
// expects each prefix to end in ErrUnexpectedEOF, never in success.
func TestBodyChunkedTruncated(t *testing.T) {
	const full = "5;e=1\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nX-A: 1\r\n\r\n"
	for i := 0; i < len(full); i++ {
		_, _, _, err := readBody(full[:i], BodyChunked, 0, 8, nil)
		if err != ErrUnexpectedEOF {
			t.Errorf("cut at %d (%q): err = %v", i, full[:i], err)
		}
	}
	if data, _, _, err := readBody(full, BodyChunked, 0, 8, nil); err != nil || data != "hello0123456789abcdef" {
		t.Fatalf("full body: %q %v", data, err)
	}
}

func TestBodyClose(t *testing.T) {
	for _, wrap := range []func(io.Reader) io.Reader{nil, iotest.OneByteReader, iotest.DataErrReader} {
		big := strings.Repeat("close-delimited ", 1000)
		data, _, _, err := readBody(big, BodyClose, -1, 64, wrap)
		if err != nil || data != big {
			t.Fatalf("got %d bytes, err %v", len(data), err)
		}
	}
	data, _, _, err := readBody("", BodyClose, -1, 64, nil)
	if err != nil || data != "" {
		t.Fatalf("empty: %q %v", data, err)
	}
}

func TestBodyErrorSticks(t *testing.T) {
	r := NewReader(strings.NewReader("zz\r\nhello\r\n0\r\n\r\n"), 64, 64)
	var b Body
	b.Reset(r, BodyChunked, 0)
	p := make([]byte, 16)
	_, err1 := b.Read(p)
	_, err2 := b.Read(p)
	if err1 != ErrChunkSize || err2 != ErrChunkSize {
		t.Fatalf("errors %v then %v", err1, err2)
	}
}

func TestAppendChunkRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		sizes    []int
		trailers string
		header   string // AppendChunkHeader of the first size
	}{
		{name: "one byte", sizes: []int{1}, header: "1\r\n"},
		{name: "fifteen", sizes: []int{15}, header: "f\r\n"},
		{name: "sixteen", sizes: []int{16}, header: "10\r\n"},
		{name: "mixed", sizes: []int{255, 256, 4095, 1}, header: "ff\r\n"},
		{name: "large", sizes: []int{1 << 20}, header: "100000\r\n"},
		{name: "with trailers", sizes: []int{3, 2}, trailers: "X-Sum: 5\r\nX-More: a b\r\n", header: "3\r\n"},
		{name: "no chunks", header: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var enc, want []byte
			for i, n := range tt.sizes {
				data := bytes.Repeat([]byte{byte('a' + i)}, n)
				enc = AppendChunkHeader(enc, n)
				if i == 0 && string(enc) != tt.header {
					t.Fatalf("header %q, want %q", enc, tt.header)
				}
				enc = append(append(enc, data...), '\r', '\n')
				want = append(want, data...)
			}
			enc = AppendLastChunk(enc, []byte(tt.trailers))
			data, trailers, rest, err := readBody(string(enc)+"NEXT", BodyChunked, 0, 64, nil)
			if err != nil || data != string(want) || trailers != tt.trailers || rest != "NEXT" {
				t.Fatalf("err %v, %d bytes (want %d), trailers %q, rest %q", err, len(data), len(want), trailers, rest)
			}
		})
	}
	if got := string(AppendChunkHeader([]byte("x"), 0)); got != "x0\r\n" {
		t.Fatalf("AppendChunkHeader(0) = %q", got)
	}
	if got := string(AppendLastChunk(nil, nil)); got != "0\r\n\r\n" {
		t.Fatalf("AppendLastChunk = %q", got)
	}
}

// TestBodyNoEmptyReads checks that Read never returns (0, nil) for a
// non-empty buffer, even when a chunk's CRLF arrives after its data.
func TestBodyNoEmptyReads(t *testing.T) {
	const in = "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
	r := NewReader(iotest.OneByteReader(strings.NewReader(in)), 1, 64)
	var b Body
	b.Reset(r, BodyChunked, 0)
	var got []byte
	p := make([]byte, 8)
	for i := 0; ; i++ {
		n, err := b.Read(p)
		got = append(got, p[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("Read %d returned (0, nil)", i)
		}
	}
	if string(got) != "abcde" {
		t.Fatalf("got %q", got)
	}
}
