package h2up

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/h2test"
	"relay/internal/testcert"
)

// h2cServer serves handler over HTTP/2 without TLS (prior knowledge) on a
// loopback listener, closed with its connections when the test ends.
func h2cServer(t testing.TB, srv *http2.Server, handler http.Handler) string {
	t.Helper()
	return h2test.ServeH2C(t, srv, handler).Addr
}

// dial connects to addr and starts HTTP/2 on the connection, closed when
// the test ends.
func dial(t testing.TB, addr string, o Options) *Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(nc, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		<-c.Done()
	})
	return c
}

// tlsServer serves handler over HTTP/2 on TLS with ALPN h2, and returns
// its address and a client configuration that trusts it.
func tlsServer(t testing.TB, handler http.Handler) (string, *tls.Config) {
	t.Helper()
	ca := testcert.NewCA(t)
	pair := ca.Server(t, testcert.ECDSA, "127.0.0.1")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair.TLS},
		NextProtos:   []string{"h2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http2.Server{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				tc := nc.(*tls.Conn)
				if err := tc.Handshake(); err != nil || tc.ConnectionState().NegotiatedProtocol != "h2" {
					return
				}
				srv.ServeConn(tc, &http2.ServeConnOpts{Handler: handler})
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String(), &tls.Config{RootCAs: ca.Pool, NextProtos: []string{"h2"}, ServerName: "127.0.0.1"}
}

// get is a request head for path.
func get(path string) []hpack.HeaderField {
	return []hpack.HeaderField{
		{Name: ":method", Value: "GET"},
		{Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: "backend"},
		{Name: ":path", Value: path},
	}
}

// post is a request head for a POST to path.
func post(path string) []hpack.HeaderField {
	h := get(path)
	h[0].Value = "POST"
	return h
}

// field returns the value of the named field, or "".
func field(fields []hpack.HeaderField, name string) string {
	for _, f := range fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// readAll reads a stream's body, with a bound of time.
func readAll(t testing.TB, s *Stream) ([]byte, error) {
	t.Helper()
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	var out []byte
	buf := make([]byte, 8192)
	for {
		n, err := s.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fake is a backend that speaks HTTP/2 frame by frame, for the tests of
// what a misbehaving backend makes relay do.
type fake struct {
	t   testing.TB
	nc  net.Conn
	fr  *http2.Framer
	bw  *bufio.Writer
	wmu sync.Mutex
}

// fakeBackend starts a connection from relay to a fake backend, which has
// read relay's preface and SETTINGS and sent its own settings.
func fakeBackend(t testing.TB, o Options, settings ...http2.Setting) (*Conn, *fake) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- nc
	}()
	c := dial(t, ln.Addr().String(), o)
	nc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { nc.Close() })
	f := &fake{t: t, nc: nc}
	f.bw = bufio.NewWriter(nc)
	f.fr = http2.NewFramer(f.bw, nc)
	f.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	f.fr.MaxHeaderListSize = 1 << 20
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	pre := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(nc, pre); err != nil || string(pre) != http2.ClientPreface {
		t.Fatalf("preface: %q %v", pre, err)
	}
	sf := f.next()
	if s, ok := sf.(*http2.SettingsFrame); !ok || s.IsAck() {
		t.Fatalf("first frame %v, want SETTINGS", sf)
	}
	f.write(func() { f.fr.WriteSettings(settings...) })
	f.until("relay's SETTINGS ACK", func(fr http2.Frame) bool {
		s, ok := fr.(*http2.SettingsFrame)
		return ok && s.IsAck()
	})
	return c, f
}

// head sends a header block of name, value pairs on stream id.
func (f *fake) head(id uint32, end bool, fields ...string) {
	f.write(func() {
		var b []byte
		e := hpack.NewEncoder(sliceWriter{&b})
		for i := 0; i+1 < len(fields); i += 2 {
			e.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
		}
		f.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b, EndStream: end, EndHeaders: true})
	})
}

type sliceWriter struct{ b *[]byte }

func (w sliceWriter) Write(p []byte) (int, error) { *w.b = append(*w.b, p...); return len(p), nil }

// write writes frames and flushes them.
func (f *fake) write(fn func()) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	fn()
	f.bw.Flush()
}

// next reads the next frame, failing the test on error.
func (f *fake) next() http2.Frame {
	f.t.Helper()
	f.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	fr, err := f.fr.ReadFrame()
	if err != nil {
		f.t.Fatalf("fake backend read: %v", err)
	}
	return fr
}

// until reads frames until one for which match holds, failing the test
// if the connection ends first.
func (f *fake) until(what string, match func(http2.Frame) bool) http2.Frame {
	f.t.Helper()
	for {
		f.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		fr, err := f.fr.ReadFrame()
		if err != nil {
			f.t.Fatalf("fake backend: waiting for %s: %v", what, err)
		}
		if match(fr) {
			return fr
		}
	}
}

// goAway reads frames until relay's GOAWAY, closes the connection and
// returns the GOAWAY's code; ok is false if the connection ended without
// one.
func (f *fake) goAway() (code http2.ErrCode, ok bool) {
	for {
		f.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		fr, err := f.fr.ReadFrame()
		if err != nil {
			return 0, false
		}
		if g, isGA := fr.(*http2.GoAwayFrame); isGA {
			// Gone: relay need not wait for the fake to close.
			f.nc.Close()
			return g.ErrCode, true
		}
	}
}

// isHeaders matches a request head.
func isHeaders(fr http2.Frame) bool { _, ok := fr.(*http2.MetaHeadersFrame); return ok }

// isErr reports whether err is or wraps target.
func isErr(err, target error) bool { return errors.Is(err, target) }
