package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"relay/internal/testcert"
)

// trailerBackend is a Go net/http backend whose /trail?size=N answers N
// bytes, declaring X-Checksum and X-Count in Trailer and setting them
// once the body is written, so the answer is chunked with trailers. With
// forbidden=1 it also sends trailer fields no trailer may carry. Its
// /echo reads a request body and answers the request's trailers, as the
// backend received them, in its response head.
func trailerBackend(t *testing.T) *backendServer {
	return newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/trail":
				size, _ := strconv.Atoi(r.URL.Query().Get("size"))
				w.Header().Set("Trailer", "X-Checksum, X-Count")
				w.Header().Set("Content-Type", "application/octet-stream")
				sum := sha256.New()
				chunk := []byte(strings.Repeat("0123456789abcdef", 2048))
				for left := size; left > 0; {
					p := chunk[:min(left, len(chunk))]
					w.Write(p)
					sum.Write(p)
					left -= len(p)
				}
				w.Header().Set("X-Checksum", hex.EncodeToString(sum.Sum(nil)))
				w.Header().Set("X-Count", strconv.Itoa(size))
				if r.URL.Query().Get("forbidden") == "1" {
					for _, name := range []string{"Content-Length", "Transfer-Encoding", "Set-Cookie", "Authorization",
						"Proxy-Authenticate", "Host", "Te", "Content-Type", "Keep-Alive"} {
						w.Header().Set(http.TrailerPrefix+name, "5")
					}
					w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
				}
			case "/echo":
				io.Copy(io.Discard, r.Body)
				for name, vs := range r.Trailer {
					w.Header().Set("Got-"+name, strings.Join(vs, ","))
				}
				w.Header().Set("Got-Te", r.Header.Get("Te"))
				io.WriteString(w, "ok")
			default:
				h.ServeHTTP(w, r)
			}
		})
	})
}

// trailerClients are Go's HTTP/2 client over TLS (h2 by ALPN) and over
// cleartext with prior knowledge (h2c), both granting a 16 KiB stream
// window and the 64 KiB connection window HTTP/2 starts with, so a large
// body is sent in many rounds of flow control; and Go's HTTP/1.1 client.
func trailerClients(t *testing.T, r *relay, tlsAddr string, ca *testcert.CA) map[string]struct {
	c    *http.Client
	base string
} {
	small := &http.HTTP2Config{MaxReceiveBufferPerStream: 16 << 10, MaxReceiveBufferPerConnection: 65535}
	tlsTp := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca.Pool, ServerName: "a.example"},
		ForceAttemptHTTP2: true,
		HTTP2:             small,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", tlsAddr)
		},
	}
	h2c := &http.Transport{HTTP2: small, Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	h1 := &http.Transport{}
	for _, tp := range []*http.Transport{tlsTp, h2c, h1} {
		t.Cleanup(tp.CloseIdleConnections)
	}
	return map[string]struct {
		c    *http.Client
		base string
	}{
		"h2":       {&http.Client{Transport: tlsTp, Timeout: 20 * time.Second}, "https://a.example"},
		"h2c":      {&http.Client{Transport: h2c, Timeout: 20 * time.Second}, "http://" + r.addr},
		"http/1.1": {&http.Client{Transport: h1, Timeout: 20 * time.Second}, "http://" + r.addr},
	}
}

// startTrailerRelay starts relay, with processes processes, over be with a
// cleartext listener with h2c on and a TLS one.
func startTrailerRelay(t *testing.T, ca *testcert.CA, processes int, be *backendServer) (*relay, string) {
	file := writeConfig(t, fmt.Sprintf("processes: %d\ntls_listen: 127.0.0.1:0\nh2c: true\n", processes)+
		certsYAML(ca.Server(t, testcert.ECDSA, "a.example"))+backendsYAML([]string{be.url}))
	r, started := startRelay(t, "", "-config", file)
	_, port, err := net.SplitHostPort(started.Str("tls_listen"))
	if err != nil {
		t.Fatalf("relay started without a tls_listen address: %v", started)
	}
	return r, net.JoinHostPort("127.0.0.1", port)
}

// A backend's response trailers reach Go's HTTP/2 client, over TLS and
// h2c, after a small body, after 1 MiB sent through many rounds of flow
// control, and after an empty body; they reach an HTTP/1.1 client as
// before. Fields no trailer may carry stay behind on HTTP/2.
func TestResponseTrailersReachHTTP2Clients(t *testing.T) {
	forProcesses(t, responseTrailers)
}

func responseTrailers(t *testing.T, processes int) {
	ca := testcert.NewCA(t)
	r, tlsAddr := startTrailerRelay(t, ca, processes, trailerBackend(t))
	for proto, cl := range trailerClients(t, r, tlsAddr, ca) {
		for _, size := range []int{11, 1 << 20, 0} {
			for _, forbidden := range []bool{false, true} {
				name := fmt.Sprintf("%s/size=%d/forbidden=%v", proto, size, forbidden)
				url := fmt.Sprintf("%s/trail?size=%d", cl.base, size)
				if forbidden {
					url += "&forbidden=1"
				}
				res, err := cl.c.Get(url)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				body, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil {
					t.Fatalf("%s: reading the body: %v", name, err)
				}
				wantMajor := map[string]int{"h2": 2, "h2c": 2, "http/1.1": 1}[proto]
				if res.StatusCode != 200 || res.ProtoMajor != wantMajor || len(body) != size {
					t.Fatalf("%s: %d over %s with %d body bytes, want 200 over HTTP/%d with %d", name, res.StatusCode, res.Proto, len(body), wantMajor, size)
				}
				sum := sha256.Sum256(body)
				if got, want := res.Trailer.Get("X-Checksum"), hex.EncodeToString(sum[:]); got != want {
					t.Errorf("%s: trailer X-Checksum %q, want %q (trailers %v)", name, got, want, res.Trailer)
				}
				if got := res.Trailer.Get("X-Count"); got != strconv.Itoa(size) {
					t.Errorf("%s: trailer X-Count %q, want %d", name, got, size)
				}
				if !forbidden || wantMajor == 1 {
					continue // HTTP/1.1 clients get the trailer section as it came
				}
				if got := res.Trailer.Get("Grpc-Status"); got != "0" {
					t.Errorf("%s: trailer Grpc-Status %q, want 0", name, got)
				}
				for _, f := range []string{"Content-Length", "Transfer-Encoding", "Set-Cookie", "Authorization",
					"Proxy-Authenticate", "Host", "Te", "Content-Type", "Keep-Alive"} {
					if v, ok := res.Trailer[f]; ok {
						t.Errorf("%s: trailer %s passed: %q", name, f, v)
					}
				}
			}
		}
	}
}

// An HTTP/2 client's request trailers, a HEADERS frame after its DATA
// frames, reach the HTTP/1.1 backend after the last chunk of the body,
// without the fields no trailer may carry; over HTTP/1.1 they pass as
// before. A body of declared length goes with its Content-Length and has
// no place for trailers.
func TestRequestTrailersReachTheBackend(t *testing.T) {
	ca := testcert.NewCA(t)
	r, tlsAddr := startTrailerRelay(t, ca, 1, trailerBackend(t))
	for proto, cl := range trailerClients(t, r, tlsAddr, ca) {
		for _, size := range []int{5, 300 << 10} {
			for _, declared := range []bool{false, true} {
				name := fmt.Sprintf("%s/size=%d/declared=%v", proto, size, declared)
				body := strings.Repeat("x", size)
				req, err := http.NewRequest("POST", cl.base+"/echo", io.NopCloser(strings.NewReader(body)))
				if err != nil {
					t.Fatal(err)
				}
				if declared {
					req.ContentLength = int64(size)
				}
				req.Header.Set("Te", "trailers")
				req.Trailer = http.Header{"X-Sum": nil, "Grpc-Timeout": nil, "Authorization": nil, "Set-Cookie": nil}
				req.Body = &trailingBody{r: strings.NewReader(body), set: func() {
					req.Trailer.Set("X-Sum", strconv.Itoa(size))
					req.Trailer.Set("Grpc-Timeout", "1S")
					req.Trailer.Set("Authorization", "Basic eDp5")
					req.Trailer.Set("Set-Cookie", "a=1")
				}}
				res, err := cl.c.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					t.Fatalf("%s: status %d", name, res.StatusCode)
				}
				t.Logf("%s: the backend got TE %q", name, res.Header.Get("Got-Te"))
				if declared && proto != "http/1.1" {
					if v := res.Header.Get("Got-X-Sum"); v != "" {
						t.Errorf("%s: a body of declared length carried trailer X-Sum %q", name, v)
					}
					continue
				}
				if declared {
					continue // Go's HTTP/1.1 client sends it chunked or not as it likes
				}
				if got := res.Header.Get("Got-X-Sum"); got != strconv.Itoa(size) {
					t.Errorf("%s: the backend got trailer X-Sum %q, want %d (head %v)", name, got, size, res.Header)
				}
				if got := res.Header.Get("Got-Grpc-Timeout"); got != "1S" {
					t.Errorf("%s: the backend got trailer Grpc-Timeout %q, want 1S", name, got)
				}
				if proto == "http/1.1" {
					continue // the HTTP/1.1 door passes the section as it came
				}
				for _, f := range []string{"Authorization", "Set-Cookie"} {
					if v := res.Header.Get("Got-" + f); v != "" {
						t.Errorf("%s: the backend got trailer %s %q", name, f, v)
					}
				}
			}
		}
	}
}

// trailingBody is a request body that sets the request's trailer values
// once it has been read to its end, as a streaming sender would.
type trailingBody struct {
	r   io.Reader
	set func()
}

func (b *trailingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF && b.set != nil {
		b.set()
		b.set = nil
	}
	return n, err
}

func (b *trailingBody) Close() error { return nil }
