package grpctest

import (
	"net/http"
	"strings"
	"testing"
)

// StartDual starts a server in clear text that speaks both HTTP/1.1 and
// HTTP/2 with prior knowledge on one port, as a backend whose protocol a
// balancer may switch: gRPC calls over HTTP/2 go to the test service
// (over HTTP/1.1 they get a 503, which a gRPC client reads as
// UNAVAILABLE), and any other request is answered "ok" with its protocol in the X-Proto
// header. Close is registered for cleanup.
func StartDual(t testing.TB) *Server {
	t.Helper()
	s, ln := newServer(t)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			if r.ProtoMajor != 2 {
				http.Error(w, "gRPC needs HTTP/2", http.StatusServiceUnavailable)
				return
			}
			s.srv.ServeHTTP(w, r)
			return
		}
		s.Calls.Add(1)
		w.Header().Set("X-Proto", r.Proto)
		w.Write([]byte("ok"))
	})}
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetUnencryptedHTTP2(true)
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return s
}
