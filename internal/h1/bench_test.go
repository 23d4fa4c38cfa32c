package h1

import (
	"bytes"
	"io"
	"testing"
)

// browserRequest is a typical browser GET with eight header fields.
const browserRequest = "GET /products/42?ref=home&sort=price HTTP/1.1\r\n" +
	"Host: shop.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\n" +
	"Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n" +
	"Accept-Language: en-US,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br, zstd\r\n" +
	"Referer: https://shop.example.com/\r\n" +
	"Cookie: session=3f2a9c1e7b; theme=dark; cart=17\r\n" +
	"Connection: keep-alive\r\n\r\n"

// typicalResponse is a typical backend answer head.
const typicalResponse = "HTTP/1.1 200 OK\r\n" +
	"Date: Sun, 22 Nov 2026 03:00:00 GMT\r\n" +
	"Server: app/1.0\r\n" +
	"Content-Type: text/html; charset=utf-8\r\n" +
	"Content-Length: 5120\r\n" +
	"Cache-Control: private, max-age=0\r\n" +
	"Set-Cookie: session=3f2a9c1e7b; Path=/; HttpOnly\r\n" +
	"Vary: Accept-Encoding\r\n" +
	"Connection: keep-alive\r\n\r\n"

func BenchmarkParseRequest(b *testing.B) {
	head := []byte(browserRequest)
	var req Request
	b.ReportAllocs()
	b.SetBytes(int64(len(head)))
	for b.Loop() {
		if err := ParseRequest(head, &req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseResponse(b *testing.B) {
	head := []byte(typicalResponse)
	var resp Response
	b.ReportAllocs()
	b.SetBytes(int64(len(head)))
	for b.Loop() {
		if err := ParseResponse(head, &resp, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadRequest measures the Reader path a connection takes: find
// the head in the buffer, then parse it.
func BenchmarkReadRequest(b *testing.B) {
	data := []byte(browserRequest)
	src := bytes.NewReader(data)
	r := NewReader(src, 4096, 4096)
	var req Request
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		src.Reset(data)
		r.Reset(src)
		if err := r.ReadRequest(&req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkChunkedBody decodes a 64 KiB body sent as 4 KiB chunks.
func BenchmarkChunkedBody(b *testing.B) {
	chunk := bytes.Repeat([]byte("x"), 4096)
	var in []byte
	for i := 0; i < 16; i++ {
		in = AppendChunkHeader(in, len(chunk))
		in = append(append(in, chunk...), '\r', '\n')
	}
	in = AppendLastChunk(in, nil)
	src := bytes.NewReader(in)
	r := NewReader(src, 4096, 4096)
	var body Body
	buf := make([]byte, 32<<10)
	b.ReportAllocs()
	b.SetBytes(16 * 4096)
	for b.Loop() {
		src.Reset(in)
		r.Reset(src)
		body.Reset(r, BodyChunked, 0)
		for {
			_, err := body.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
