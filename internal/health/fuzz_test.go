package health

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"relay/internal/h1"
)

// probeResponseSeeds are the seeds of FuzzProbeResponse, which
// TestProbeResponseSeedsOverTCP also sends over real connections.
var probeResponseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
	"HTTP/1.1 204 No Content\n\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
	"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\n\r\n",
	"HTTP/1.0 200 OK\r\n\r\nbody until close",
	"HTTP/1.1 503 Service Unavailable\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX: " + strings.Repeat("x", maxHead) + "\r\n\r\n",
	"",
}

// probeTimeout bounds each probe of the fuzz target and of the seed test.
const probeTimeout = 5 * time.Second

// FuzzProbeResponse feeds arbitrary answers to the HTTP probe and checks
// it against relay's data-path parser: the probe passes only when h1
// accepts the final response head and its status is 2xx, it never panics,
// and it returns within its timeout. The answers travel over an in-memory
// connection: a loopback connection per input would leave the fuzzer's
// thousands of executions a second waiting on the kernel, and the server
// side's TIME_WAIT sockets would soon use up the ephemeral ports.
// TestProbeResponseSeedsOverTCP runs the seeds over real sockets.
//
//	go test -fuzz=FuzzProbeResponse ./internal/health
func FuzzProbeResponse(f *testing.F) {
	for _, seed := range probeResponseSeeds {
		f.Add([]byte(seed))
	}
	b := newBackend(f, "http://127.0.0.1:1")
	h := newHTTPCheck(b, "/health", true, newReadBufs())
	f.Fuzz(func(t *testing.T, answer []byte) {
		client, server := net.Pipe()
		go func() {
			server.Write(answer)
			server.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		client.SetDeadline(time.Now().Add(probeTimeout))
		start := time.Now()
		_, err := h.read(ctx, client, false)
		client.Close() // frees the writer if the probe stopped reading
		if d := time.Since(start); d > probeTimeout+time.Second {
			t.Fatalf("the probe took %v", d)
		}
		want := acceptedByDataPath(answer)
		if (err == nil) != want {
			t.Fatalf("probe error %v; the data path accepts a 2xx final head: %v\nanswer %q", err, want, answer)
		}
	})
}

// TestProbeResponseSeedsOverTCP runs whole probes against a server that
// sends each seed of FuzzProbeResponse over a loopback TCP connection and
// closes it, and holds them to the fuzz target's rule.
func TestProbeResponseSeedsOverTCP(t *testing.T) {
	for _, seed := range probeResponseSeeds {
		addr := serveRaw(t, func(c net.Conn, _ []byte) { io.WriteString(c, seed) })
		h := newHTTPCheck(newBackend(t, "http://"+addr), "/health", true, newReadBufs())
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		start := time.Now()
		err := h.probe(ctx)
		d := time.Since(start)
		cancel()
		h.closeIdle()
		if d > probeTimeout+time.Second {
			t.Errorf("the probe took %v on %.60q", d, seed)
		}
		if want := acceptedByDataPath([]byte(seed)); (err == nil) != want {
			t.Errorf("probe error %v; the data path accepts a 2xx final head: %v\nanswer %.200q", err, want, seed)
		}
	}
}

// acceptedByDataPath reports whether relay's h1 reader reads a final 2xx
// response head from answer, after at most maxInterim interim ones, and
// whatever body follows is well framed up to maxDrain bytes.
func acceptedByDataPath(answer []byte) bool {
	br := h1.NewReader(bytes.NewReader(answer), 512, maxHead)
	var resp h1.Response
	for n := 0; ; n++ {
		if err := br.ReadResponse(&resp, false); err != nil {
			return false
		}
		if resp.Status >= 200 || resp.Status == 101 {
			break
		}
		if n == maxInterim {
			return false
		}
	}
	if resp.Status < 200 || resp.Status > 299 {
		return false
	}
	var body h1.Body
	body.Reset(br, resp.Body, resp.ContentLength)
	buf := make([]byte, 4096)
	for read := 0; !body.Done() && read < maxDrain; {
		n, err := body.Read(buf[:min(len(buf), maxDrain-read)])
		read += n
		if err != nil {
			return err == io.EOF
		}
	}
	return true
}
