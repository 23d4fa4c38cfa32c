package main

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"relay/internal/testcert"
)

// h2Conn is a raw HTTP/2 client connection over TLS, for sending what no
// well-behaved client would.
type h2Conn struct {
	c  *tls.Conn
	fr *http2.Framer
}

func dialH2(t *testing.T, tr *tlsRelay) *h2Conn {
	t.Helper()
	c, err := tls.Dial("tcp", tr.tlsAddr, &tls.Config{RootCAs: tr.ca.Pool, ServerName: "a.example", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return &h2Conn{c: c, fr: fr}
}

// dialH2Relay starts relay with a TLS listener over the backend at url,
// with extra config lines, and dials it as a raw HTTP/2 client.
func dialH2Relay(t *testing.T, ca *testcert.CA, extra, url string) *h2Conn {
	t.Helper()
	file := writeConfig(t, "tls_listen: 127.0.0.1:0\n"+extra+
		certsYAML(ca.Server(t, testcert.ECDSA, "a.example"))+backendsYAML([]string{url}))
	r, started := startRelay(t, "", "-config", file)
	_, port, _ := net.SplitHostPort(started.Str("tls_listen"))
	return dialH2(t, &tlsRelay{relay: r, tlsAddr: net.JoinHostPort("127.0.0.1", port), ca: ca})
}

// headerBlock is an HPACK-encoded GET request head for path, with extra
// fields (name, value, ...).
func headerBlock(path string, extra ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "a.example"}, {":path", path}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
	}
	return buf.Bytes()
}

// closedWithin reads frames until the connection ends (relay closed it,
// after GOAWAY or not) or d passes; it reports whether it ended and the
// GOAWAY code relay sent, if any.
func (h *h2Conn) closedWithin(d time.Duration) (closed bool, goaway http2.ErrCode, sawGoAway bool) {
	h.c.SetReadDeadline(time.Now().Add(d))
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return false, goaway, sawGoAway
			}
			return true, goaway, sawGoAway
		}
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			goaway, sawGoAway = ga.ErrCode, true
		}
	}
}

// rssKB is the resident memory of pid and its children, in KiB.
func rssKB(t *testing.T, pid int) int {
	t.Helper()
	total := 0
	pids := processTree(pid)
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				total += n
			}
		}
	}
	return total
}

// bystander is a well-behaved HTTP/2 client that GETs through relay while
// another connection abuses it, and relay's memory when it started.
type bystander struct {
	tr         *tlsRelay
	rssBefore  int
	stop       chan struct{}
	ok, failed atomic.Int64
	done       sync.WaitGroup
}

func startBystander(t *testing.T, tr *tlsRelay) *bystander {
	b := &bystander{tr: tr, rssBefore: rssKB(t, tr.cmd.Process.Pid), stop: make(chan struct{})}
	c := tr.client(t, "a.example", true)
	b.done.Go(func() {
		for {
			select {
			case <-b.stop:
				return
			default:
			}
			res, err := c.Get("https://a.example/")
			if err != nil {
				b.failed.Add(1)
				continue
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				b.ok.Add(1)
			} else {
				b.failed.Add(1)
			}
		}
	})
	return b
}

// check stops the bystander and fails the test unless it was served
// throughout and relay grew by less than 64 MiB; it returns what it saw.
func (b *bystander) check(t *testing.T) string {
	t.Helper()
	close(b.stop)
	b.done.Wait()
	after := rssKB(t, b.tr.cmd.Process.Pid)
	if b.ok.Load() == 0 || b.failed.Load() > 0 {
		t.Errorf("the other client: %d ok, %d failed", b.ok.Load(), b.failed.Load())
	}
	if after-b.rssBefore > 64<<10 {
		t.Errorf("relay grew from %d to %d KiB", b.rssBefore, after)
	}
	return fmt.Sprintf("other client %d ok, %d failed; RSS %d -> %d KiB", b.ok.Load(), b.failed.Load(), b.rssBefore, after)
}

// A client that opens streams and resets them at once (Rapid Reset,
// CVE-2023-44487) is cut off, relay's memory stays bounded, and another
// client is served throughout.
func TestHTTP2RapidResetIsCutOff(t *testing.T) {
	ca := testcert.NewCA(t)
	tr := startTLSRelay(t, ca, "", ca.Server(t, testcert.ECDSA, "a.example"))
	by := startBystander(t, tr)

	h := dialH2(t, tr)
	block := headerBlock("/")
	const streams = 20000
	sent := 0
	for id := uint32(1); sent < streams; id += 2 {
		if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			break // relay closed the connection
		}
		if err := h.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			break
		}
		sent++
	}
	closed, code, sawGoAway := h.closedWithin(10 * time.Second)
	time.Sleep(200 * time.Millisecond) // let the other client run past the abuse
	t.Logf("sent %d HEADERS+RST_STREAM pairs; closed %v, GOAWAY %v (%v); %s", sent, closed, sawGoAway, code, by.check(t))
	if !closed {
		t.Errorf("relay kept serving a connection that reset %d streams", sent)
	}
}

// A client that sends one header block as an endless run of CONTINUATION
// frames (CVE-2023-45288) is cut off once the block passes
// max_header_bytes, and relay's memory stays bounded.
func TestHTTP2ContinuationFloodIsCutOff(t *testing.T) {
	ca := testcert.NewCA(t)
	tr := startTLSRelay(t, ca, "max_header_bytes: 16384\n", ca.Server(t, testcert.ECDSA, "a.example"))
	by := startBystander(t, tr)

	h := dialH2(t, tr)
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock("/"), EndHeaders: false}); err != nil {
		t.Fatal(err)
	}
	// Each CONTINUATION carries another 1 KiB header field; up to 64 MiB.
	frag := headerBlock("/", "x-flood", strings.Repeat("a", 1000))[len(headerBlock("/")):]
	written := 0
	for written < 64<<20 {
		h.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if err := h.fr.WriteContinuation(1, false, frag); err != nil {
			break
		}
		written += len(frag)
	}
	closed, _, _ := h.closedWithin(10 * time.Second)
	t.Logf("wrote %d KiB of CONTINUATION before relay stopped reading; closed %v; %s", written>>10, closed, by.check(t))
	if !closed || written >= 64<<20 {
		t.Errorf("relay took %d KiB of one header block without closing the connection", written>>10)
	}
}

// On shutdown an HTTP/2 client gets GOAWAY and its open stream finishes.
func TestHTTP2ShutdownSendsGoAwayAndFinishesStreams(t *testing.T) {
	ca := testcert.NewCA(t)
	release := make(chan struct{})
	var arrived sync.Once
	got := make(chan struct{})
	slow := newBackend(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				arrived.Do(func() { close(got) })
				<-release
				io.WriteString(w, "finished")
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	file := writeConfig(t, "tls_listen: 127.0.0.1:0\nshutdown_timeout: 10s\n"+certsYAML(ca.Server(t, testcert.ECDSA, "a.example"))+backendsYAML([]string{slow.url}))
	r, started := startRelay(t, "", "-config", file)
	_, port, _ := net.SplitHostPort(started.Str("tls_listen"))
	tr := &tlsRelay{relay: r, tlsAddr: net.JoinHostPort("127.0.0.1", port), ca: ca}

	h := dialH2(t, tr)
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock("/slow"), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the backend")
	}
	r.signal(syscall.SIGTERM)
	// GOAWAY first, then the answer to the open stream, then the end.
	h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var sawGoAway, sawData bool
	for !sawGoAway {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("before GOAWAY: %v", err)
		}
		if _, ok := f.(*http2.GoAwayFrame); ok {
			sawGoAway = true
		}
	}
	close(release)
	var body []byte
	for !sawData {
		f, err := h.fr.ReadFrame()
		if err != nil {
			t.Fatalf("the open stream got no answer after GOAWAY: %v", err)
		}
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 1 {
			body = append(body, d.Data()...)
			sawData = d.StreamEnded()
		}
	}
	if string(body) != "finished" {
		t.Errorf("the open stream's answer: %q", body)
	}
	if code, exited := r.wait(10 * time.Second); !exited || code != 0 {
		t.Errorf("relay exit %d (exited %v)", code, exited)
	}
}
