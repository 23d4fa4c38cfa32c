package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// streamSize is the body size of the streaming tests: 1 GiB as the issue
// asks, but 256 MiB under the race detector, where 1 GiB takes too long for
// CI's two shared cores. A buffering bug shows at either size.
func streamSize() int64 {
	if raceEnabled {
		return 256 << 20
	}
	return 1 << 30
}

// maxGrowth is how much relay's memory may grow while a body streams.
const maxGrowth = 64 << 20

// patternPeriod is the period of the byte pattern bodies carry; prime, so
// an offset mistake cannot line up with a power-of-two buffer size.
const patternPeriod = 251

// pattern is a block of the body pattern, a whole number of periods long so
// that writing it back to back continues the pattern, plus one more period
// to compare reads at any phase against.
var pattern = func() []byte {
	b := make([]byte, patternPeriod*(256+1))
	for i := range b {
		b[i] = byte(i % patternPeriod)
	}
	return b
}()

// writeBlock is what writers send each time: the pattern without its
// spare period.
var writeBlock = pattern[:patternPeriod*256]

// writePattern writes n pattern bytes to w without allocating.
func writePattern(w io.Writer, n int64) error {
	for n > 0 {
		b := writeBlock
		if int64(len(b)) > n {
			b = b[:n]
		}
		k, err := w.Write(b)
		n -= int64(k)
		if err != nil {
			return err
		}
	}
	return nil
}

// checkPattern reads n bytes from r into a fixed buffer and checks they
// continue the pattern, without allocating.
func checkPattern(r io.Reader, n int64) error {
	var buf [64 << 10]byte
	var off int64
	for off < n {
		want := n - off
		if want > int64(len(buf)) {
			want = int64(len(buf))
		}
		k, err := r.Read(buf[:want])
		if k > 0 {
			for done := 0; done < k; {
				phase := int((off + int64(done)) % patternPeriod)
				m := min(k-done, len(pattern)-phase)
				if !bytes.Equal(buf[done:done+m], pattern[phase:phase+m]) {
					return fmt.Errorf("body differs from what was sent near byte %d", off+int64(done))
				}
				done += m
			}
			off += int64(k)
		}
		if err != nil && off < n {
			return fmt.Errorf("body ended after %d of %d bytes: %w", off, n, err)
		}
	}
	return nil
}

// memWatch samples the process's memory while a transfer runs. relay runs
// in this process, and the test's clients and backends stream through fixed
// buffers, so growth is relay's.
type memWatch struct {
	base, peak runtime.MemStats
	stop, done chan struct{}
}

func watchMemory() *memWatch {
	m := &memWatch{stop: make(chan struct{}), done: make(chan struct{})}
	// Two collections empty sync.Pools, so buffers relay pooled during
	// earlier requests do not hide in the baseline.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m.base)
	m.peak = m.base
	go func() {
		defer close(m.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var s runtime.MemStats
		for {
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
			runtime.ReadMemStats(&s)
			m.peak.HeapInuse = max(m.peak.HeapInuse, s.HeapInuse)
			m.peak.Sys = max(m.peak.Sys, s.Sys)
		}
	}()
	return m
}

// check stops sampling and fails the test if memory grew too much.
func (m *memWatch) check(t *testing.T) {
	t.Helper()
	close(m.stop)
	<-m.done
	heap := int64(m.peak.HeapInuse) - int64(m.base.HeapInuse)
	sys := int64(m.peak.Sys) - int64(m.base.Sys)
	t.Logf("memory growth during transfer: heap in use %.1f MiB, from the OS %.1f MiB", float64(heap)/(1<<20), float64(sys)/(1<<20))
	if heap > maxGrowth || sys > maxGrowth {
		t.Errorf("memory grew by heap %d, sys %d bytes; want under %d", heap, sys, maxGrowth)
	}
}

func TestLargeUploadStreams(t *testing.T) {
	size := streamSize()
	got := make(chan error, 1)
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		c.SetDeadline(time.Now().Add(time.Minute))
		_, h, err := readHead(br)
		if err != nil {
			got <- err
			return
		}
		if h.Get("Content-Length") != strconv.FormatInt(size, 10) {
			got <- fmt.Errorf("backend got Content-Length %q", h.Get("Content-Length"))
			return
		}
		err = checkPattern(br, size)
		got <- err
		io.WriteString(c, okResponse("received"))
	})
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	c.SetDeadline(time.Now().Add(time.Minute))

	m := watchMemory()
	start := time.Now()
	write(t, c, fmt.Sprintf("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", size))
	if err := writePattern(c, size); err != nil {
		t.Fatalf("upload: %v", err)
	}
	resp, body := readResponse(t, br, "POST")
	m.check(t)
	t.Logf("%d MiB up in %v", size>>20, time.Since(start))
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || body != "received" {
		t.Errorf("response %d %q", resp.StatusCode, body)
	}
}

func TestLargeDownloadStreams(t *testing.T) {
	size := streamSize()
	rb := newRawBackend(t, func(rb *rawBackend, c net.Conn, br *bufio.Reader) {
		c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := rb.next(br); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", size)
		writePattern(c, size)
	})
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	c.SetDeadline(time.Now().Add(time.Minute))

	m := watchMemory()
	start := time.Now()
	write(t, c, "GET /download HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength != size {
		t.Errorf("Content-Length %d, want %d", resp.ContentLength, size)
	}
	if err := checkPattern(resp.Body, size); err != nil {
		t.Fatal(err)
	}
	m.check(t)
	t.Logf("%d MiB down in %v", size>>20, time.Since(start))
}

func TestChunkedRequestBodyPassesThrough(t *testing.T) {
	rb, reqs := recordingBackend(t, okResponse("ok"))
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	// Sent in pieces, so relay reads the body in more than one go.
	parts := []string{
		"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n",
		"5\r\nhello\r\n",
		"6;ext=1\r\n world\r\n",
		"0\r\nX-Sum: 11\r\n\r\n",
	}
	for _, p := range parts {
		write(t, c, p)
	}
	resp, body := readResponse(t, br, "POST")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("response %d %q", resp.StatusCode, body)
	}
	req := <-reqs
	if te := req.Header.Get("Transfer-Encoding"); te != "chunked" {
		t.Errorf("backend got Transfer-Encoding %q, want chunked", te)
	}
	if string(req.Body) != "hello world" {
		t.Errorf("backend got body %q", req.Body)
	}
	if v := req.Trailer.Get("X-Sum"); v != "11" {
		t.Errorf("backend got trailer X-Sum %q, want 11", v)
	}
}

const chunkedResponse = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
	"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 11\r\n\r\n"

func TestChunkedResponsePassesThroughWithTrailers(t *testing.T) {
	rb, _ := recordingBackend(t, chunkedResponse)
	r := startRelay(t, Config{}, rb.b)
	c, br := dialRelay(t, r)
	for i := 0; i < 2; i++ { // the connection stays usable afterwards
		write(t, c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if body != "hello world" {
			t.Errorf("body %q", body)
		}
		if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
			t.Errorf("Transfer-Encoding %q, want chunked", resp.TransferEncoding)
		}
		if v := resp.Trailer.Get("X-Sum"); v != "11" {
			t.Errorf("trailer X-Sum %q, want 11", v)
		}
	}
}

// TestLargeChunkedResponse: a body of unknown length from net/http, flushed
// in pieces, takes many pump rounds to re-frame.
func TestLargeChunkedResponse(t *testing.T) {
	const size = 4 << 20
	hb := newHTTPBackend(t, "a", 1, func(w http.ResponseWriter, r *http.Request) {
		f := w.(http.Flusher)
		for sent := 0; sent < size; sent += len(writeBlock) {
			w.Write(writeBlock[:min(len(writeBlock), size-sent)])
			f.Flush()
		}
	})
	r := startRelay(t, Config{}, hb.b)
	resp, err := newClient(t, 1, "").Get(r.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != -1 {
		t.Errorf("Content-Length %d, want a chunked body", resp.ContentLength)
	}
	if err := checkPattern(resp.Body, size); err != nil {
		t.Fatal(err)
	}
	if n, _ := io.Copy(io.Discard, resp.Body); n != 0 {
		t.Errorf("%d bytes beyond the body", n)
	}
}

// TestHTTP10ClientGetsCloseDelimitedBody: an HTTP/1.0 client cannot read
// chunked framing, so relay removes it and ends the body by closing.
func TestHTTP10ClientGetsCloseDelimitedBody(t *testing.T) {
	tests := []struct {
		name, head string
	}{
		{"plain", "GET / HTTP/1.0\r\n\r\n"},
		{"asking for keep-alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rb, reqs := recordingBackend(t, chunkedResponse)
			r := startRelay(t, Config{}, rb.b)
			c, br := dialRelay(t, r)
			write(t, c, tt.head)
			all, err := io.ReadAll(br)
			if err != nil {
				t.Fatalf("reading until close: %v", err)
			}
			head, body, _ := strings.Cut(string(all), "\r\n\r\n")
			if body != "hello world" {
				t.Errorf("body %q, want the chunked body unframed", body)
			}
			lower := strings.ToLower(head)
			if strings.Contains(lower, "transfer-encoding") || strings.Contains(lower, "content-length") {
				t.Errorf("head %q frames the body; want it delimited by close", head)
			}
			if !strings.Contains(lower, "connection: close") {
				t.Errorf("head %q lacks Connection: close", head)
			}
			if req := <-reqs; req.Header.Get("Host") != rb.b.URL.Host {
				t.Errorf("backend got Host %q, want the backend's own for a client that sent none", req.Header.Get("Host"))
			}
		})
	}
}
