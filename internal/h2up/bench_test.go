package h2up

import (
	"io"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// BenchmarkUnary is a gRPC-like unary call through one connection to an
// x/net HTTP/2 server on loopback, from parallel goroutines: a request
// head and a small body, a response head, a small body and trailers.
func BenchmarkUnary(b *testing.B) {
	reply := make([]byte, 64)
	addr := h2cServer(b, &http2.Server{}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("Trailer", "Grpc-Status")
		w.WriteHeader(200)
		w.Write(reply)
		w.Header().Set("Grpc-Status", "0")
	}))
	c := dial(b, addr, Options{MaxStreams: 1000})
	head := []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "backend"},
		{Name: ":path", Value: "/pkg.Service/Method"},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "te", Value: "trailers"},
	}
	body := make([]byte, 64)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 1024)
		for pb.Next() {
			s := c.Open()
			for s == nil {
				time.Sleep(time.Microsecond)
				s = c.Open()
			}
			if err := s.WriteHead(head, false); err != nil {
				b.Error(err)
				return
			}
			if _, err := s.Write(body); err != nil {
				b.Error(err)
				return
			}
			if err := s.CloseWrite(nil); err != nil {
				b.Error(err)
				return
			}
			if _, err := s.ReadHead(); err != nil {
				b.Error(err)
				return
			}
			for {
				_, err := s.Read(buf)
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
			s.Close()
		}
	})
}
